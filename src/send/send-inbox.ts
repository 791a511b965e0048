import type { SessionHost } from "../session/host";
import type { Provenance, TranscriptMessage } from "../session/types";

/**
 * The rows behind sessions_send's `steer` and `notify` modes (table `send_inbox`, src/session/schema.ts).
 * OpenClaw keeps both in process memory and loses them on a restart; here each is a row written in the
 * transaction that accepts it, and taken in the transaction that uses it, so an eviction between the two
 * loses nothing and repeats nothing (docs/contract.md, "sessions_send modes").
 *
 * - `steer`, state `pending`: for the running run `run_id`; its next model step takes it (`drainSteers`).
 *   A steer the run never reached is moved to `followup` when the run ends (`steersToFollowup`) and
 *   becomes a turn of its own (src/send/send-modes.ts).
 * - `notify`, state `pending`: for the session's next turn, whatever runs it (`claimNotifications`).
 * - state `consumed`: used; kept (bounded, `KEEP_CONSUMED_ROWS`) so a retried call with the same
 *   idempotency key still finds its receipt instead of sending twice.
 */

/** Pending notifications one session keeps; a newer one evicts the oldest (OpenClaw's bound; docs/limits.md). */
export const MAX_PENDING_NOTIFICATIONS = 20;
/** Pending steers one run takes; beyond, a steer is refused (docs/limits.md): a flood must not grow the next step without bound. */
export const MAX_PENDING_STEERS = 20;
/** Used rows kept for idempotent retries (oldest pruned on each insert, so the table stays bounded). */
export const KEEP_CONSUMED_ROWS = 100;

export type InboxKind = "steer" | "notify";
export type InboxMessage = Extract<TranscriptMessage, { role: "user" }>;

type InboxRow = {
  id: string;
  kind: InboxKind;
  state: "pending" | "followup" | "consumed";
  run_id: string | null;
  message_json: string;
};

/** The message a steer or notification is: the text with its inter-session provenance, as the transcript keeps it. */
export function inboxMessage(text: string, provenance: Provenance, now: number): InboxMessage {
  return { role: "user", content: [{ type: "text", text }], timestamp: now, provenance };
}

/** The row an idempotency key already made, if any (a retried call answers with it). */
export function inboxByKey(host: SessionHost, idempotencyKey: string | undefined): InboxRow | undefined {
  if (!idempotencyKey) return undefined;
  return host.sql
    .exec<InboxRow>(
      "SELECT id, kind, state, run_id, message_json FROM send_inbox WHERE idempotency_key = ?",
      idempotencyKey,
    )
    .toArray()[0];
}

function pendingCount(host: SessionHost, kind: InboxKind, runId: string | null): number {
  return host.sql
    .exec<{ n: number }>(
      "SELECT COUNT(*) AS n FROM send_inbox WHERE kind = ? AND state = 'pending' AND run_id IS ?",
      kind,
      runId,
    )
    .one().n;
}

function insert(
  host: SessionHost,
  kind: InboxKind,
  runId: string | null,
  message: InboxMessage,
  idempotencyKey: string | undefined,
): string {
  const id = crypto.randomUUID();
  host.sql.exec(
    "INSERT INTO send_inbox (id, kind, state, run_id, message_json, idempotency_key, created_at) VALUES (?, ?, 'pending', ?, ?, ?, ?)",
    id,
    kind,
    runId,
    JSON.stringify(message),
    idempotencyKey ?? null,
    message.timestamp,
  );
  // Bounded: used rows beyond the newest KEEP_CONSUMED_ROWS go (one indexed delete per insert).
  host.sql.exec(
    `DELETE FROM send_inbox WHERE state = 'consumed' AND seq <= (
       SELECT seq FROM send_inbox WHERE state = 'consumed' ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
    KEEP_CONSUMED_ROWS,
  );
  return id;
}

/** Inside the caller's transaction: a steer for the running run `runId`, or "full" past MAX_PENDING_STEERS. */
export function insertSteer(
  host: SessionHost,
  runId: string,
  message: InboxMessage,
  idempotencyKey: string | undefined,
): string | "full" {
  if (pendingCount(host, "steer", runId) >= MAX_PENDING_STEERS) return "full";
  return insert(host, "steer", runId, message, idempotencyKey);
}

/** Inside the caller's transaction: a notification for the next turn; the oldest pending ones beyond the bound are evicted. */
export function insertNotification(
  host: SessionHost,
  message: InboxMessage,
  idempotencyKey: string | undefined,
): { id: string; evicted: number } {
  const id = insert(host, "notify", null, message, idempotencyKey);
  const over = pendingCount(host, "notify", null) - MAX_PENDING_NOTIFICATIONS;
  if (over > 0)
    host.sql.exec(
      `DELETE FROM send_inbox WHERE id IN (
         SELECT id FROM send_inbox WHERE kind = 'notify' AND state = 'pending' AND run_id IS NULL ORDER BY seq LIMIT ?)`,
      over,
    );
  return { id, evicted: Math.max(0, over) };
}

/**
 * The steers waiting for run `runId`, taken now (its next model step): each enters the transcript as a
 * user message in the same transaction that marks it used, so the step that sees it and the history
 * that shows it agree, and a step retried after an eviction never takes it twice.
 */
export function drainSteers(host: SessionHost, runId: string): InboxMessage[] {
  if (!host.hasStorage) return [];
  return host.storage.transactionSync(() => {
    // A step that starts after the run ended (deadline, abort) takes nothing: its steers became a follow-up turn.
    if (host.runRow(runId)?.status !== "running") return [];
    const rows = host.sql
      .exec<InboxRow>(
        "SELECT id, kind, state, run_id, message_json FROM send_inbox WHERE kind = 'steer' AND state = 'pending' AND run_id = ? ORDER BY seq",
        runId,
      )
      .toArray();
    const now = Date.now();
    return rows.map((r) => {
      const msg = { ...(JSON.parse(r.message_json) as InboxMessage), timestamp: now };
      host.transcript.append(msg, runId, "send");
      host.sql.exec("UPDATE send_inbox SET state = 'consumed', consumed_at = ? WHERE id = ?", now, r.id);
      return msg;
    });
  });
}

/**
 * The notifications for run `runId`, the session's next turn: the pending ones are marked used by this
 * run, in one transaction, and those it already took are returned again — a run retried after an
 * eviction sees the same notifications; no later turn sees them.
 */
export function claimNotifications(host: SessionHost, runId: string): InboxMessage[] {
  if (!host.hasStorage) return [];
  return host.storage.transactionSync(() => {
    host.sql.exec(
      "UPDATE send_inbox SET state = 'consumed', run_id = ?, consumed_at = ? WHERE kind = 'notify' AND state = 'pending'",
      runId,
      Date.now(),
    );
    return host.sql
      .exec<{ message_json: string }>(
        "SELECT message_json FROM send_inbox WHERE kind = 'notify' AND run_id = ? ORDER BY seq",
        runId,
      )
      .toArray()
      .map((r) => JSON.parse(r.message_json) as InboxMessage);
  });
}

/** Inside the run-ending transaction: the steers run `runId` never reached move to `followup`; how many. */
export function steersToFollowup(host: SessionHost, runId: string): number {
  host.sql.exec(
    "UPDATE send_inbox SET state = 'followup' WHERE kind = 'steer' AND state = 'pending' AND run_id = ?",
    runId,
  );
  return host.sql
    .exec<{ n: number }>("SELECT COUNT(*) AS n FROM send_inbox WHERE kind = 'steer' AND state = 'followup'")
    .one().n;
}

/** The oldest steers waiting to become follow-up turns (at most `limit`). */
export function followupSteers(host: SessionHost, limit: number): { id: string; message: InboxMessage }[] {
  return host.sql
    .exec<InboxRow>(
      "SELECT id, kind, state, run_id, message_json FROM send_inbox WHERE kind = 'steer' AND state = 'followup' ORDER BY seq LIMIT ?",
      limit,
    )
    .toArray()
    .map((r) => ({ id: r.id, message: JSON.parse(r.message_json) as InboxMessage }));
}

export function markConsumed(host: SessionHost, id: string): void {
  host.sql.exec("UPDATE send_inbox SET state = 'consumed', consumed_at = ? WHERE id = ?", Date.now(), id);
}

/** Largest steer text (docs/limits.md): up to MAX_PENDING_STEERS of them may join one model step. */
export const MAX_STEER_BYTES = 64 * 1024;
/** Largest notification text (docs/limits.md): up to MAX_PENDING_NOTIFICATIONS of them join one turn's system prompt. */
export const MAX_NOTIFICATION_BYTES = 16 * 1024;

/**
 * How a turn's notifications reach its model (and a webhook runtime): a block of its system prompt, one line
 * per notification with its sender, oldest first. They are context for this turn, not messages to answer.
 */
export function notificationsContext(notes: InboxMessage[], shownKey: (key: string) => string): string | undefined {
  if (notes.length === 0) return undefined;
  const lines = notes.map((n) => {
    const text =
      typeof n.content === "string" ? n.content : n.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    const from = n.provenance?.sourceSessionKey ? shownKey(n.provenance.sourceSessionKey) : "unknown";
    return `- [${new Date(n.timestamp).toISOString()}] from session ${from}: ${text}`;
  });
  return `Notifications sent to this session since its last turn (sessions_send mode=notify; context for this turn, no reply is expected to them):\n${lines.join("\n")}`;
}

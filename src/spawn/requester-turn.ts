import { queueDelivery } from "../channels/outbox";
import { log } from "../log";
import { utf8ByteLength } from "../policy/history-sanitize";
import type { FlowFinding } from "../session/audit-types";
import type { SessionExtension } from "../session/extensions";
import { getFlowRow, moveFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { timerGuard } from "../session/run-audit";
import type { RunEndedEvent } from "../session/run-types";
import type { DeliveryRoute, RunSnapshot } from "../session/types";
import { type ChildOutcome, isSilentToken } from "./announce-format";
import { releaseSlotSync, SLOT_TIMER } from "./child-slots";
import { type CompletionEvent, formatCompletionEvents } from "./completion-event";
import { ANNOUNCE_IN_FLOW, type AnnounceHandoff, announceRoute, recordDirectAnnounce } from "./direct-announce";

/**
 * "requester" announce delivery (docs/subagents.md): the requester hears a child's completion as a
 * turn of its own and its reply is what reaches its channel. Every step is a row written with its
 * cause, so an eviction between any two steps repeats nothing and loses nothing:
 *
 *   announce received  → event row `turn_pending` + `subagent-turn` timer          (receive transaction)
 *   timer              → one run of kind `subagent_completion` for up to 5 pending
 *                        events (same thread, ≤ 256 KiB), rows `turn_queued`        (enqueue transaction, idempotent key)
 *   run ends ok        → reply delivered to the route (NO_REPLY / ANNOUNCE_SKIP: silent), rows `turn_done`
 *   run fails/timeout  → each event's direct announce recorded and delivered, rows `fallback`
 *                                                                                  (run-ending transaction)
 * The child's slot stays taken until its event is absorbed, so a parent sub-agent's own announce
 * (resumed when its last slot ends) comes after its synthesis turn and reports it.
 */

export const COMPLETION_TURN_TIMER = "subagent-turn";
const TURN_REF = "inbox";
/** One turn takes at most this many completions, and at most this many bytes of event text. */
export const MAX_EVENTS_PER_TURN = 5;
export const MAX_TURN_INPUT_BYTES = 256 * 1024;
const BUSY_RECHECK_MS = 60_000;
/**
 * A requester that is never idle (one run after another) would never take its completion turn, and the
 * child's slot would stay held: a completion waits for the requester at most this long, then its direct
 * announce goes instead (docs/subagents.md).
 */
export const REQUESTER_IDLE_WAIT_MS = 10 * 60_000;

/** What an event row keeps: enough for the turn, and for the direct announce if the turn fails. */
interface PendingEvent {
  childKey: string;
  childRunId: string;
  message: string;
  route: DeliveryRoute | null;
  threadId?: string;
  outcome?: ChildOutcome;
  event: CompletionEvent;
}

/**
 * A sub-agent requester speaks to its parent, not a user: its turn is internal and delivers nothing (a
 * completion turn here, a yield's resume turn in src/spawn/yield-batch.ts).
 */
export function isSubagentRequester(host: SessionHost): boolean {
  return Boolean(host.meta?.subagent) || host.key.includes(":subagent:");
}

/**
 * What the end of a turn that speaks for its children says (a completion turn here, a yield's resume turn):
 * its trimmed reply, whether that is a silent token (NO_REPLY, ANNOUNCE_SKIP: answered, nothing to deliver),
 * and whether the turn answered at all — an empty reply or a failed turn says nothing about the completions,
 * so the user still gets each child's direct announce.
 */
export function turnAnswer(run: RunSnapshot): { reply: string; silent: boolean; answered: boolean } {
  const reply = run.status === "ok" ? (run.reply ?? "").trim() : "";
  const silent = isSilentToken(reply, "NO_REPLY") || isSilentToken(reply, "ANNOUNCE_SKIP");
  return { reply, silent, answered: run.status === "ok" && (silent || reply.length > 0) };
}

/** Inside the receive transaction: queue the completion for a turn. The slot stays held until it is absorbed. */
export function acceptForTurn(
  host: SessionHost,
  h: AnnounceHandoff & { message: string; event: CompletionEvent },
): void {
  const now = Date.now();
  const row: PendingEvent = {
    childKey: h.childKey,
    childRunId: h.childRunId,
    message: h.message,
    route: h.route ?? null,
    ...(h.threadId ? { threadId: h.threadId } : {}),
    ...(h.outcome ? { outcome: h.outcome } : {}),
    event: h.event,
  };
  putFlowRow(host.sql, { id: h.idempotencyKey, kind: ANNOUNCE_IN_FLOW, state: "turn_pending", data: row }, "fail", now);
  // The pending event (and its timer) now guarantee the slot ends; the existence check must not end it first.
  host.timers.clear(SLOT_TIMER, h.childKey);
  host.timers.set(COMPLETION_TURN_TIMER, TURN_REF, now, undefined, { keepEarlier: true });
}

function pendingEvents(host: SessionHost): { id: string; e: PendingEvent; since: number }[] {
  return host.sql
    .exec<{ id: string; json: string; created_at: number }>(
      "SELECT id, json, created_at FROM flows WHERE kind = ? AND state = 'turn_pending' ORDER BY created_at, rowid LIMIT ?",
      ANNOUNCE_IN_FLOW,
      MAX_EVENTS_PER_TURN * 4,
    )
    .toArray()
    .map((r) => ({ id: r.id, e: JSON.parse(r.json) as PendingEvent, since: r.created_at }));
}

/** The next turn's events: the oldest pending one and those after it for the same thread, within the bounds. */
function nextBatch(host: SessionHost): { id: string; e: PendingEvent }[] {
  const pending = pendingEvents(host);
  if (pending.length === 0) return [];
  const thread = pending[0].e.threadId ?? null;
  const batch = [pending[0]];
  let bytes = utf8ByteLength(pending[0].e.message);
  for (const p of pending.slice(1)) {
    if (batch.length >= MAX_EVENTS_PER_TURN) break;
    if ((p.e.threadId ?? null) !== thread) continue;
    if (bytes + utf8ByteLength(p.e.message) > MAX_TURN_INPUT_BYTES) break;
    batch.push(p);
    bytes += utf8ByteLength(p.e.message);
  }
  return batch;
}

function busy(host: SessionHost): boolean {
  return host.sql.exec("SELECT id FROM runs WHERE status IN ('queued', 'running') LIMIT 1").toArray().length > 0;
}

/**
 * The timer: queue one turn for the next batch. Its idempotency key is the batch's first event, so a
 * re-run finds the same run. While the requester is busy the turn waits (completions arriving
 * meanwhile join it); the end of the busy run brings the timer forward (`onRunEnded` below).
 */
async function startCompletionTurn(host: SessionHost): Promise<void> {
  const batch = host.meta ? nextBatch(host) : [];
  if (batch.length === 0) {
    host.timers.clear(COMPLETION_TURN_TIMER, TURN_REF);
    return;
  }
  if (busy(host)) {
    const now = Date.now();
    const pending = pendingEvents(host);
    const waitedTooLong = pending.filter((p) => now - p.since >= REQUESTER_IDLE_WAIT_MS);
    if (waitedTooLong.length > 0) {
      // Bounded wait: these completions are told directly now (and their slots freed); newer ones wait on.
      host.storage.transactionSync(() => {
        for (const { id, e } of waitedTooLong) settleEvent(host, id, e, "fallback", now);
        host.timers.set(COMPLETION_TURN_TIMER, TURN_REF, now + BUSY_RECHECK_MS);
      });
      log.warn("subagent_completion_not_waited", {
        sessionKey: host.key,
        events: waitedTooLong.length,
        reason: `the requester stayed busy for ${REQUESTER_IDLE_WAIT_MS / 1000}s; the direct announce was delivered`,
      });
      return;
    }
    // Safety net only: a run's end re-arms the timer at once; the oldest completion's wait ends at its bound.
    const oldest = pending[0]?.since ?? now;
    host.timers.set(COMPLETION_TURN_TIMER, TURN_REF, Math.min(now + BUSY_RECHECK_MS, oldest + REQUESTER_IDLE_WAIT_MS));
    return;
  }
  const internal = isSubagentRequester(host);
  const ids = batch.map((b) => b.id);
  await host.enqueue(
    {
      input: {
        kind: "subagent_completion",
        message: formatCompletionEvents(
          batch.map((b) => b.e.event),
          internal,
        ),
        provenance: { kind: "internal_system", sourceSessionKey: batch[0].e.childKey, sourceTool: "sessions_spawn" },
        timeoutSeconds: Math.max(1, Math.ceil(host.cfg.agents.defaults.subagents.announceTimeoutMs / 1000)),
        // Delivered by this module when the turn ends (or replaced by the direct announce), never by the outbox's reply path.
        deliver: false,
        data: { events: ids },
      },
      idempotencyKey: `subagent:completion:${ids[0]}`,
    },
    (h) => {
      const now = Date.now();
      for (const id of ids) moveFlowRow(h.sql, id, "turn_queued", { from: "turn_pending", now });
      const more =
        h.sql.exec("SELECT id FROM flows WHERE kind = ? AND state = 'turn_pending' LIMIT 1", ANNOUNCE_IN_FLOW).toArray()
          .length > 0;
      if (more) h.timers.set(COMPLETION_TURN_TIMER, TURN_REF, now);
      else h.timers.clear(COMPLETION_TURN_TIMER, TURN_REF);
    },
  );
}

/** Inside every run-ending transaction: completions that waited for this run get their turn now. */
function onRunEnded(host: SessionHost, event: RunEndedEvent): void {
  if (event.input.kind === "subagent_completion") onTurnEnded(host, event);
  if (host.timers.get(COMPLETION_TURN_TIMER, TURN_REF))
    host.timers.set(COMPLETION_TURN_TIMER, TURN_REF, Date.now(), undefined, { keepEarlier: true });
}

/** The turn's end: deliver its reply, or fall back to the direct announces. */
function onTurnEnded(host: SessionHost, { run, input }: RunEndedEvent): void {
  const ids = Array.isArray(input.data?.events) ? (input.data.events as string[]) : [];
  const rows = ids
    .map((id) => ({ id, row: getFlowRow<PendingEvent>(host.sql, id) }))
    .filter((r) => r.row?.state === "turn_queued")
    .map((r) => ({ id: r.id, e: r.row!.data }));
  if (rows.length === 0) return;
  const { reply, silent, answered } = turnAnswer(run);
  const now = Date.now();
  if (answered && !silent && !isSubagentRequester(host)) {
    const route = announceRoute(host, rows[0].e);
    if (route) queueDelivery(host, { kind: "reply", route, message: reply, idempotencyKey: `reply:${run.runId}` });
  }
  for (const { id, e } of rows) settleEvent(host, id, e, answered ? "turn_done" : "fallback", now);
}

/** End one event: absorbed by a turn, or told as its direct announce. Frees the child's slot with its outcome. */
function settleEvent(
  host: SessionHost,
  id: string,
  e: PendingEvent,
  state: "turn_done" | "fallback",
  now: number,
): void {
  if (state === "fallback")
    recordDirectAnnounce(host, {
      idempotencyKey: id,
      childKey: e.childKey,
      message: e.message,
      route: e.route,
      threadId: e.threadId,
    });
  moveFlowRow(host.sql, id, state, { now });
  releaseSlotSync(host, e.childKey, e.outcome);
}

/** The sweeper's audit (src/session/run-audit.ts): completions waiting for a turn are moved on by the turn timer. */
function auditPendingTurns(host: SessionHost): FlowFinding[] {
  const waiting = host.sql
    .exec("SELECT 1 FROM flows WHERE kind = ? AND state = 'turn_pending' LIMIT 1", ANNOUNCE_IN_FLOW)
    .toArray().length;
  return waiting > 0 ? [timerGuard(host, "completion inbox", "turn_pending", COMPLETION_TURN_TIMER, TURN_REF)] : [];
}

/** The requester's completion turns: its sub-agents' results reach its model in one run. */
export const requesterTurnExtension: SessionExtension = {
  name: "subagent-requester-turn",
  onRunEnded,
  audit: auditPendingTurns,
  timers: {
    // A turn that can never be queued gives up like every timer (docs/timers.md): its waiting completions are told directly.
    [COMPLETION_TURN_TIMER]: {
      onDead(host) {
        const now = Date.now();
        for (const { id, e } of pendingEvents(host)) settleEvent(host, id, e, "fallback", now);
      },
    },
  },
  onTimer: (host) => startCompletionTurn(host),
};

/**
 * The reply of this session's latest completion turn since `sinceMs` that said something (not a
 * silent token): a parent sub-agent's synthesis of its children, which its own announce reports.
 */
export function latestSynthesis(host: SessionHost, sinceMs: number): string | null {
  const rows = host.sql
    .exec<{ reply: string | null }>(
      "SELECT reply FROM runs WHERE kind = 'subagent_completion' AND status = 'ok' AND ended_at >= ? ORDER BY qseq DESC LIMIT ?",
      sinceMs,
      MAX_EVENTS_PER_TURN * 4,
    )
    .toArray();
  for (const r of rows) {
    const text = (r.reply ?? "").trim();
    if (text && !isSilentToken(text, "NO_REPLY") && !isSilentToken(text, "ANNOUNCE_SKIP")) return text;
  }
  return null;
}

import { displayKey } from "../keys";
import { log } from "../log";
import { resolveSendPolicy } from "../policy/send-policy";
import { DELIVERY_LIST_BYTES, jsonBytes, takeWithinBudget } from "../session/byte-budget";
import { registerSessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunEndedEvent } from "../session/run-types";
import type { TimerRow } from "../session/timers";
import type { DeliveryRoute, SessionMeta } from "../session/types";
import { MAX_DELIVERY_ATTEMPTS, nextRetryDelayMs, type OutboundPayload, postWebhook } from "./webhook";

/**
 * The outbox: the one place where anything leaves the system for a channel (docs/contract.md, "Flows"; docs/webhooks.md).
 *
 * `queueDelivery` writes a row and its timer inside the caller's transaction, so a delivery exists
 * exactly when the state that caused it does. The alarm (timer kind `outbox`) makes the attempts:
 * at-least-once, the same idempotency key on every retry, exponential backoff, a dead letter after
 * the last attempt. Send policy for outbound deliveries is decided here and nowhere else (test/send-policy-e2e.test.ts;
 * sessions_send checks the same policy up front, to refuse the send itself).
 */

export type DeliveryKind = "reply" | "announce" | "subagent_announce";
export type DeliveryStatus = "pending" | "delivered" | "blocked" | "dead";

export interface QueueDeliveryInput {
  kind: DeliveryKind;
  route: DeliveryRoute;
  message: string;
  idempotencyKey: string;
}

export interface DeadDelivery {
  id: string;
  idempotencyKey: string;
  route: DeliveryRoute;
  message: string;
  error: string;
}

export interface DeliveryView {
  id: string;
  idempotencyKey: string;
  kind: DeliveryKind;
  channel: string;
  status: DeliveryStatus;
  attempts: number;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | null;
  payload: OutboundPayload;
}

type OutboxRow = {
  id: string;
  idempotency_key: string;
  kind: DeliveryKind;
  channel: string;
  payload_json: string;
  status: DeliveryStatus;
  attempts: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
};

export const BLOCKED_BY_POLICY = "send blocked by session policy";
/** Timer kinds owned by the outbox: a delivery attempt, and telling `onDeliveryDead` handlers. */
export const OUTBOX_TIMER = "outbox";
export const OUTBOX_DEAD_TIMER = "outbox_dead";
/**
 * An attempt in progress pushes its timer this far ahead first: a second alarm run (or an eviction
 * mid-POST) then finds nothing due, and the attempt is retried only if this instance died with it.
 */
const ATTEMPT_LEASE_MS = 60_000;

type DeadHandler = (host: SessionHost, delivery: DeadDelivery) => void | Promise<void>;
const DEAD_HANDLERS = new Map<DeliveryKind, DeadHandler[]>();

/** Called when a delivery of this kind ends dead (last attempt failed, or no webhook configured). */
export function onDeliveryDead(kind: DeliveryKind, handler: DeadHandler): void {
  const list = DEAD_HANDLERS.get(kind) ?? [];
  list.push(handler);
  DEAD_HANDLERS.set(kind, list);
}

export function noWebhookError(channel: string): string {
  return `No webhook configured for channel "${channel}" (set channels.${channel}.webhookUrl)`;
}

/**
 * Whether a delivery to `channel` may be attempted now: send policy first, then a configured webhook.
 * Decided when a delivery is queued and again when an operator re-queues one, so a retry can never
 * send what the session's policy still blocks.
 */
function deliveryDecision(host: SessionHost, channel: string): { status: DeliveryStatus; error: string | null } {
  const meta = host.meta;
  const policy = resolveSendPolicy({
    policy: host.cfg.session.sendPolicy,
    override: meta?.sendPolicy,
    sessionKey: host.key,
    channel,
    chatType: meta?.chatType,
  });
  // Blocked is a decision, not a failure: recorded (visible over /v1), never attempted.
  if (policy === "deny") return { status: "blocked", error: BLOCKED_BY_POLICY };
  // A channel nobody configured is a dead letter the operator can see, not a silent drop.
  if (!host.cfg.channels[channel]?.webhookUrl) return { status: "dead", error: noWebhookError(channel) };
  return { status: "pending", error: null };
}

/**
 * Synchronous: call inside a transaction of `host`. Applies send policy, writes the outbox row and
 * its timer. The same idempotencyKey twice returns the existing row — never a second delivery.
 * The caller arms the alarm (`await host.timers.arm()`) after its transaction commits.
 */
export function queueDelivery(host: SessionHost, d: QueueDeliveryInput): { id: string; status: DeliveryStatus } {
  const existing = host.sql
    .exec<OutboxRow>("SELECT * FROM outbox WHERE idempotency_key = ?", d.idempotencyKey)
    .toArray()[0];
  if (existing) return { id: existing.id, status: existing.status };

  const now = Date.now();
  const id = crypto.randomUUID();
  const channel = (d.route.channel || "unknown").toLowerCase();
  const payload: OutboundPayload = {
    channel,
    to: d.route.to ?? null,
    ...(d.route.accountId != null ? { accountId: d.route.accountId } : {}),
    ...(d.route.threadId != null ? { threadId: String(d.route.threadId) } : {}),
    message: d.message,
    sessionKey: displayKey(host.key),
    kind: d.kind,
    idempotencyKey: d.idempotencyKey,
  };

  const { status, error } = deliveryDecision(host, channel);
  const payloadJson = JSON.stringify(payload);
  host.sql.exec(
    `INSERT INTO outbox (id, idempotency_key, kind, channel, payload_json, status, attempts, last_error, created_at, updated_at, bytes)
     VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)`,
    id,
    d.idempotencyKey,
    d.kind,
    channel,
    payloadJson,
    status,
    error,
    now,
    now,
    jsonBytes(payloadJson),
  );
  if (status === "pending") host.timers.set(OUTBOX_TIMER, id, now);
  // Dead handlers may do I/O (tell a requester), so they run from a timer, never inside this transaction.
  if (status === "dead") host.timers.set(OUTBOX_DEAD_TIMER, id, now);
  deliveryChanged(host, id);
  return { id, status };
}

function view(r: OutboxRow): DeliveryView {
  return {
    id: r.id,
    idempotencyKey: r.idempotency_key,
    kind: r.kind,
    channel: r.channel,
    status: r.status,
    attempts: r.attempts,
    lastError: r.last_error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    deliveredAt: r.delivered_at,
    payload: JSON.parse(r.payload_json) as OutboundPayload,
  };
}

/** A delivery changed state: its event for the session's watchers, in the same transaction (docs/events.md). */
function deliveryChanged(host: SessionHost, id: string): void {
  const r = host.sql
    .exec<Pick<OutboxRow, "id" | "status" | "kind" | "channel" | "attempts" | "last_error">>(
      "SELECT id, status, kind, channel, attempts, last_error FROM outbox WHERE id = ?",
      id,
    )
    .one();
  host.events.delivery({ ...r, error: r.last_error });
}

function deliveryById(host: SessionHost, id: string): DeliveryView | null {
  const r = host.sql.exec<OutboxRow>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
  return r ? view(r) : null;
}

/**
 * Deliveries of a session, newest first (GET /v1/sessions/{key}/deliveries), within DELIVERY_LIST_BYTES:
 * the rows' sizes come from an index first and only the rows that fit are loaded (at least one).
 * `truncated`: the byte budget, not `limit`, ended the listing.
 */
export function listDeliveries(
  host: SessionHost,
  opts: { status?: DeliveryStatus; limit: number },
): { deliveries: DeliveryView[]; truncated: boolean } {
  if (!host.hasStorage) return { deliveries: [], truncated: false };
  const where = opts.status ? "WHERE status = ?" : "";
  const index = opts.status ? "outbox_status_listing" : "outbox_listing";
  const args = opts.status ? [opts.status] : [];
  const sizes = host.sql
    .exec<{ bytes: number }>(
      `SELECT bytes FROM outbox INDEXED BY ${index} ${where} ORDER BY created_at DESC, id LIMIT ?`,
      ...args,
      opts.limit,
    )
    .toArray();
  const { count } = takeWithinBudget(
    sizes.map((r) => r.bytes + 300),
    DELIVERY_LIST_BYTES,
  );
  // The same order with LIMIT count: the rows just sized, in one synchronous pass (nothing can interleave).
  const rows =
    count > 0
      ? host.sql
          .exec<OutboxRow>(`SELECT * FROM outbox ${where} ORDER BY created_at DESC, id LIMIT ?`, ...args, count)
          .toArray()
      : [];
  return { deliveries: rows.map(view), truncated: count < sizes.length };
}

/**
 * Put a dead (or blocked) delivery back in the queue — when the policy and channel now allow it — with a fresh attempt budget, keeping its
 * idempotency key so a receiver that did get an earlier attempt can still de-duplicate.
 */
export function retryDelivery(host: SessionHost, id: string): DeliveryView | null {
  if (!host.hasStorage) return null;
  return host.storage.transactionSync(() => {
    const row = host.sql.exec<OutboxRow>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
    if (!row) return null;
    if (row.status === "dead" || row.status === "blocked") {
      const now = Date.now();
      const decision = deliveryDecision(host, row.channel);
      if (decision.status === "pending") {
        host.sql.exec("UPDATE outbox SET status = 'pending', attempts = 0, updated_at = ? WHERE id = ?", now, id);
        host.timers.clear(OUTBOX_DEAD_TIMER, id);
        host.timers.set(OUTBOX_TIMER, id, now);
      } else {
        // Still refused (policy or channel): it stays where it is, with the reason as it stands now.
        host.sql.exec(
          "UPDATE outbox SET status = ?, last_error = ?, updated_at = ? WHERE id = ?",
          decision.status,
          decision.error,
          now,
          id,
        );
      }
      deliveryChanged(host, id);
    }
    return deliveryById(host, id);
  });
}

/** Attempts currently in flight in this isolate, so two alarm passes never POST the same row at once. */
const inFlight = new WeakMap<SessionHost, Set<string>>();

/** Deliveries of this object whose webhook POST is in flight (their timer is pushed ahead meanwhile, so no timer row shows them). */
export function deliveriesInFlight(host: SessionHost): number {
  return inFlight.get(host)?.size ?? 0;
}

/** One delivery attempt of a due `outbox` timer. */
async function attempt(host: SessionHost, timer: TimerRow): Promise<void> {
  const busy = inFlight.get(host) ?? new Set<string>();
  inFlight.set(host, busy);
  if (busy.has(timer.ref)) return;
  // Claim: re-read under a transaction (another pass may have handled it) and push the timer ahead.
  const claimed = host.storage.transactionSync(() => {
    const t = host.timers.get(OUTBOX_TIMER, timer.ref);
    const row = host.sql.exec<OutboxRow>("SELECT * FROM outbox WHERE id = ?", timer.ref).toArray()[0];
    if (row?.status !== "pending") {
      host.timers.clear(OUTBOX_TIMER, timer.ref);
      return null;
    }
    if (!t || t.due_at > Date.now()) return null;
    const attempts = row.attempts + 1;
    host.sql.exec("UPDATE outbox SET attempts = ?, updated_at = ? WHERE id = ?", attempts, Date.now(), row.id);
    host.timers.set(OUTBOX_TIMER, row.id, Date.now() + ATTEMPT_LEASE_MS);
    return { row, attempts };
  });
  if (!claimed) return;
  busy.add(timer.ref);
  try {
    const payload = JSON.parse(claimed.row.payload_json) as OutboundPayload;
    const channelCfg = host.cfg.channels[claimed.row.channel];
    const result = channelCfg?.webhookUrl
      ? await postWebhook({ url: channelCfg.webhookUrl, secret: channelCfg.webhookSecret, payload })
      : { outcome: "dead" as const, error: noWebhookError(claimed.row.channel) };
    log[result.outcome === "delivered" ? "info" : "warn"]("delivery_attempt", {
      sessionKey: host.key,
      deliveryId: claimed.row.id,
      webhookId: payload.idempotencyKey,
      channel: claimed.row.channel,
      attempt: claimed.attempts,
      outcome: result.outcome === "retry" && claimed.attempts >= MAX_DELIVERY_ATTEMPTS ? "dead" : result.outcome,
      ...(result.status !== undefined ? { status: result.status } : {}),
      ...(result.error ? { error: result.error } : {}),
    });
    host.storage.transactionSync(() => {
      const now = Date.now();
      if (result.outcome === "delivered") {
        host.sql.exec(
          "UPDATE outbox SET status = 'delivered', last_error = NULL, delivered_at = ?, updated_at = ? WHERE id = ?",
          now,
          now,
          claimed.row.id,
        );
        host.timers.clear(OUTBOX_TIMER, claimed.row.id);
        deliveryChanged(host, claimed.row.id);
      } else if (result.outcome === "retry" && claimed.attempts < MAX_DELIVERY_ATTEMPTS) {
        host.sql.exec(
          "UPDATE outbox SET last_error = ?, updated_at = ? WHERE id = ?",
          result.error ?? null,
          now,
          claimed.row.id,
        );
        host.timers.set(OUTBOX_TIMER, claimed.row.id, now + nextRetryDelayMs(claimed.attempts));
      } else {
        host.sql.exec(
          "UPDATE outbox SET status = 'dead', last_error = ?, updated_at = ? WHERE id = ?",
          result.error ?? "delivery failed",
          now,
          claimed.row.id,
        );
        host.timers.clear(OUTBOX_TIMER, claimed.row.id);
        host.timers.set(OUTBOX_DEAD_TIMER, claimed.row.id, now);
        deliveryChanged(host, claimed.row.id);
      }
    });
  } finally {
    busy.delete(timer.ref);
  }
  await host.timers.arm();
  // A fresh dead letter tells its handlers now instead of at the next alarm.
  if (host.timers.get(OUTBOX_DEAD_TIMER, timer.ref)) await notifyDead(host, timer.ref);
}

/** Run the `onDeliveryDead` handlers of one dead delivery; the timer row stays until they succeed. */
async function notifyDead(host: SessionHost, id: string): Promise<void> {
  const row = host.sql.exec<OutboxRow>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
  if (row?.status !== "dead") {
    host.timers.clear(OUTBOX_DEAD_TIMER, id);
    return;
  }
  const payload = JSON.parse(row.payload_json) as OutboundPayload;
  const delivery: DeadDelivery = {
    id: row.id,
    idempotencyKey: row.idempotency_key,
    route: {
      channel: payload.channel,
      to: payload.to,
      accountId: payload.accountId ?? null,
      threadId: payload.threadId ?? null,
    },
    message: payload.message,
    error: row.last_error ?? "delivery failed",
  };
  // A throwing handler leaves the timer in place; the alarm retries it with backoff.
  for (const h of DEAD_HANDLERS.get(row.kind) ?? []) await h(host, delivery);
  host.timers.clear(OUTBOX_DEAD_TIMER, id);
}

/** Kick due deliveries right away instead of waiting for the alarm to come round. */
async function attemptDueNow(host: SessionHost): Promise<void> {
  const now = Date.now();
  const due = host.sql
    .exec<TimerRow>(
      "SELECT * FROM timers WHERE kind IN (?, ?) AND due_at <= ? ORDER BY due_at LIMIT 20",
      OUTBOX_TIMER,
      OUTBOX_DEAD_TIMER,
      now,
    )
    .toArray();
  for (const t of due) {
    if (t.kind === OUTBOX_TIMER) await attempt(host, t);
    else await notifyDead(host, t.ref);
  }
}

/** The route replies of this session go to: the one recorded from its inbound channel traffic. */
export function recordedRoute(host: SessionHost): DeliveryRoute | null {
  return routeOf(host.meta);
}

/** The delivery route a session's metadata records (its last inbound channel message), or null. */
export function routeOf(m: SessionMeta | null | undefined): DeliveryRoute | null {
  if (!m?.lastChannel) return null;
  return {
    channel: m.lastChannel,
    to: m.lastTo ?? null,
    accountId: m.lastAccountId ?? null,
    threadId: m.lastThreadId ?? null,
  };
}

/** Queue the reply of a run for its session's channel (inbound `deliver: true`), in the run-ending transaction. */
export function queueReply(host: SessionHost, { run, input }: RunEndedEvent): void {
  if (!input.deliver || run.status !== "ok") return;
  const message = (run.reply ?? "").trim();
  if (!message) return;
  const route =
    recordedRoute(host) ??
    (input.route
      ? {
          channel: input.route.channel,
          to: input.route.to,
          accountId: input.route.accountId,
          threadId: input.route.threadId,
        }
      : null);
  queueDelivery(host, {
    kind: "reply",
    route: route ?? { channel: "unknown", to: null },
    message,
    idempotencyKey: `reply:${run.runId}`,
  });
}

/** Delivery listing and manual retry (GET /v1/sessions/{key}/deliveries, POST …/{id}/retry). */
const outboxRpc = {
  list: (host: SessionHost, opts: { status?: DeliveryStatus; limit: number }) => listDeliveries(host, opts),
  retry: async (host: SessionHost, id: string): Promise<DeliveryView | null> => {
    const v = retryDelivery(host, id);
    if (!v) return null;
    await host.timers.arm();
    await attemptDueNow(host);
    return deliveryById(host, id);
  },
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    outbox: typeof outboxRpc;
  }
}

registerSessionExtension({
  name: "outbox",
  // Command runs deliver their own answer once the command took effect (policy/send-command.ts).
  onRunEnded: (host, event) => {
    if (event.input.kind === "inbound") queueReply(host, event);
  },
  rpc: outboxRpc,
  afterRunEnded: (host) => attemptDueNow(host),
  async onTimer(host, timer) {
    if (timer.kind === OUTBOX_TIMER) {
      await attempt(host, timer);
      return true;
    }
    if (timer.kind === OUTBOX_DEAD_TIMER) {
      await notifyDead(host, timer.ref);
      return true;
    }
    return false;
  },
});

import { displayKey } from "../keys";
import { resolveSendPolicy } from "../policy/send-policy";
import { jsonBytes } from "../session/byte-budget";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunEndedEvent } from "../session/run-types";
import type { DeliveryRoute, SessionMeta } from "../session/types";
import { attempt, attemptDueNow, notifyDead } from "./outbox-attempts";
import {
  type DeliveryKind,
  type DeliveryStatus,
  type DeliveryView,
  deliveryById,
  deliveryChanged,
  listDeliveries,
  noWebhookError,
  OUTBOX_DEAD_TIMER,
  OUTBOX_TIMER,
  type OutboxRow,
} from "./outbox-rows";
import type { OutboundPayload } from "./webhook";

/**
 * The outbox: the one place where anything leaves the system for a channel (docs/contract.md, "Flows"; docs/webhooks.md).
 *
 * `queueDelivery` writes a row and its timer inside the caller's transaction, so a delivery exists
 * exactly when the state that caused it does. The alarm (timer kind `outbox`) makes the attempts:
 * at-least-once, the same idempotency key on every retry, exponential backoff, a dead letter after
 * the last attempt. Send policy for outbound deliveries is decided here and nowhere else (test/policy/send-policy-e2e.test.ts;
 * sessions_send checks the same policy up front, to refuse the send itself). Rows and listing: outbox-rows.ts;
 * attempts and dead letters: outbox-attempts.ts.
 */

export interface QueueDeliveryInput {
  kind: DeliveryKind;
  route: DeliveryRoute;
  message: string;
  idempotencyKey: string;
}

export const BLOCKED_BY_POLICY = "send blocked by session policy";

/**
 * Whether a delivery to `channel` may be attempted now: send policy first, then a configured webhook.
 * Decided when a delivery is queued and again when an operator re-queues one, so a retry can never
 * send what the session's policy still blocks.
 */
function deliveryDecision(
  host: SessionHost,
  channel: string,
  kind: DeliveryKind,
): { status: DeliveryStatus; error: string | null } {
  // An A2A push goes to the URL its task's client set (src/a2a/push.ts): not a channel message, so neither send
  // policy nor a channel webhook applies; the config itself is read at each attempt.
  if (kind === "a2a_push") return { status: "pending", error: null };
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
  if (!host.cfg.channels[channel]?.outbound) return { status: "dead", error: noWebhookError(channel) };
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

  const { status, error } = deliveryDecision(host, channel, d.kind);
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
      const decision = deliveryDecision(host, row.channel, row.kind);
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

/** The one outbound delivery chokepoint: deliver:true replies and announces leave through it. */
export const outboxExtension: SessionExtension = {
  name: "outbox",
  // Command runs deliver their own answer once the command took effect (policy/send-command.ts).
  onRunEnded: (host, event) => {
    if (event.input.kind === "inbound") queueReply(host, event);
  },
  rpc: outboxRpc,
  afterRunEnded: (host) => attemptDueNow(host),
  // Default attempt policy: a failing endpoint is the delivery's own budget (src/channels/webhook.ts), not the timer's.
  timers: { [OUTBOX_TIMER]: {}, [OUTBOX_DEAD_TIMER]: {} },
  async onTimer(host, timer) {
    if (timer.kind === OUTBOX_TIMER) await attempt(host, timer);
    else await notifyDead(host, timer.ref);
  },
};

import { attemptPush } from "../a2a/push-delivery";
import { log } from "../log";
import type { SessionHost } from "../session/host";
import type { TimerRow } from "../session/timers";
import type { DeadDelivery } from "../session/types";
import { deliveryChanged, noWebhookError, OUTBOX_DEAD_TIMER, OUTBOX_TIMER, type OutboxRow } from "./outbox-rows";
import { MAX_DELIVERY_ATTEMPTS, nextRetryDelayMs, type OutboundPayload, postWebhook } from "./webhook";

/**
 * Delivery attempts of the outbox: one POST per due `outbox` timer (claimed first, so two alarm passes
 * never send the same row at once), retry with backoff or a dead letter after the last attempt, and the
 * extensions' `onDeliveryDead` hooks a dead letter runs (test/channels/outbox.test.ts).
 */

/**
 * An attempt in progress pushes its timer this far ahead first: a second alarm run (or an eviction
 * mid-POST) then finds nothing due, and the attempt is retried only if this instance died with it.
 */
const ATTEMPT_LEASE_MS = 60_000;

/** Attempts currently in flight in this isolate, so two alarm passes never POST the same row at once. */
const inFlight = new WeakMap<SessionHost, Set<string>>();

/** Deliveries of this object whose webhook POST is in flight (their timer is pushed ahead meanwhile, so no timer row shows them). */
export function deliveriesInFlight(host: SessionHost): number {
  return inFlight.get(host)?.size ?? 0;
}

/** One delivery attempt of a due `outbox` timer. */
export async function attempt(host: SessionHost, timer: TimerRow): Promise<void> {
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
    const result =
      claimed.row.kind === "a2a_push"
        ? await attemptPush(host, payload)
        : channelCfg?.outbound
          ? await postWebhook({ url: channelCfg.outbound.url, secret: channelCfg.outbound.secret, payload })
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
export async function notifyDead(host: SessionHost, id: string): Promise<void> {
  const row = host.sql.exec<OutboxRow>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
  if (row?.status !== "dead") {
    host.timers.clear(OUTBOX_DEAD_TIMER, id);
    return;
  }
  const payload = JSON.parse(row.payload_json) as OutboundPayload;
  const delivery: DeadDelivery = {
    id: row.id,
    kind: row.kind,
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
  // The extensions' onDeliveryDead hooks. A throwing one leaves the timer in place; the alarm retries it with backoff.
  await host.deliveryDead(delivery);
  host.timers.clear(OUTBOX_DEAD_TIMER, id);
}

/** Kick due deliveries right away instead of waiting for the alarm to come round. */
export async function attemptDueNow(host: SessionHost): Promise<void> {
  const due = host.timers.dueOfKinds([OUTBOX_TIMER, OUTBOX_DEAD_TIMER], Date.now());
  for (const t of due) {
    if (t.kind === OUTBOX_TIMER) await attempt(host, t);
    else await notifyDead(host, t.ref);
  }
}

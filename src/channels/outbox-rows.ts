import { DELIVERY_LIST_BYTES, takeWithinBudget } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import type { OutboundPayload } from "./webhook";

/**
 * The outbox table as the rest of the outbox reads it: row and view shapes, the timer kinds, one
 * delivery by id, the bounded listing, and the event each state change emits (docs/webhooks.md).
 */

/** `a2a_push`: an A2A task's push notification (src/a2a/push.ts), POSTed to the URL its client configured. */
export type DeliveryKind = "reply" | "announce" | "subagent_announce" | "a2a_push";
export type DeliveryStatus = "pending" | "delivered" | "blocked" | "dead";

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

export type OutboxRow = {
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

/** Timer kinds owned by the outbox: a delivery attempt, and telling `onDeliveryDead` handlers. */
export const OUTBOX_TIMER = "outbox";
export const OUTBOX_DEAD_TIMER = "outbox_dead";

export function noWebhookError(channel: string): string {
  return `No webhook configured for channel "${channel}" (set channels.${channel}.outbound.url)`;
}

export function view(r: OutboxRow): DeliveryView {
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
export function deliveryChanged(host: SessionHost, id: string): void {
  const r = host.sql
    .exec<Pick<OutboxRow, "id" | "status" | "kind" | "channel" | "attempts" | "last_error">>(
      "SELECT id, status, kind, channel, attempts, last_error FROM outbox WHERE id = ?",
      id,
    )
    .one();
  host.events.delivery({ ...r, error: r.last_error });
}

export function deliveryById(host: SessionHost, id: string): DeliveryView | null {
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

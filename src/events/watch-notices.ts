import { displayKey } from "../keys";
import { inboxByKey, inboxMessage, insertNotification } from "../send/send-inbox";
import { assertOpen } from "../session/closing";
import { callExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { TimerRow } from "../session/timers";

/**
 * The watcher's side of change notices (src/events/watchers.ts has the target's). A notice enters the
 * watcher's send inbox as a notification (src/send/send-inbox.ts), so its next turn — whatever starts it —
 * reads it in its system prompt, as sessions_send mode=notify's are read. Table `watching` keeps, per target,
 * the notice this session holds (`delivered`) until a turn read it (`consumed`) and the target was told
 * (`watch-ack` timer; the row goes once the target acknowledged).
 */

export const WATCH_ACK_TIMER = "watch-ack";
/** Notices looked at when a run ends (the rest at the next run's end): a run's end costs a bounded read. */
const NOTICES_PER_RUN_END = 100;

/** The notice, byte for byte OpenClaw's: `target` as tools show keys, `lastSeen` the version to reconcile from. */
function watchNoticeText(target: string, lastSeen: number): string {
  return `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${lastSeen}.`;
}

export interface NoticeDelivery {
  target: string;
  shownTarget: string;
  /** The target's sessionId: a target deleted and created again starts its versions anew (src/events/event-ids.ts). */
  incarnation: string;
  lastSeen: number;
  notified: number;
}

type WatchingRow = {
  target_key: string;
  incarnation: string;
  notified: number;
  last_seen: number;
  inbox_key: string;
  state: "delivered" | "consumed";
};

function insertNotice(host: SessionHost, n: Omit<NoticeDelivery, "incarnation">, inboxKey: string): void {
  const text = watchNoticeText(n.shownTarget, n.lastSeen);
  insertNotification(
    host,
    inboxMessage(text, { kind: "internal_system", sourceSessionKey: n.target, sourceTool: "watch" }, Date.now()),
    inboxKey,
  );
}

/**
 * A notice from a target (its `watch-notice` timer). "gone": this session does not exist — its storage is not
 * created by asking, and the target stops watching for it. A repeat of a notice already held is a no-op.
 */
export function receiveNotice(host: SessionHost, n: NoticeDelivery): "delivered" | "gone" {
  assertOpen(host, host.key);
  if (!host.hasStorage || !host.meta) return "gone";
  return host.storage.transactionSync(() => {
    const cur = host.sql.exec<WatchingRow>("SELECT * FROM watching WHERE target_key = ?", n.target).toArray()[0];
    if (cur && cur.incarnation === n.incarnation && cur.notified >= n.notified) return "delivered";
    const inboxKey = `watch:${n.incarnation}:${n.notified}:${n.target}`;
    if (!inboxByKey(host, inboxKey)) insertNotice(host, n, inboxKey);
    host.sql.exec(
      `INSERT INTO watching (target_key, incarnation, notified, last_seen, inbox_key, state, updated_at) VALUES (?, ?, ?, ?, ?, 'delivered', ?)
       ON CONFLICT (target_key) DO UPDATE SET incarnation = excluded.incarnation, notified = excluded.notified,
         last_seen = excluded.last_seen, inbox_key = excluded.inbox_key, state = 'delivered', updated_at = excluded.updated_at`,
      n.target,
      n.incarnation,
      n.notified,
      n.lastSeen,
      inboxKey,
      Date.now(),
    );
    return "delivered";
  });
}

/**
 * Inside the run-ending transaction: the notices a turn of this session read (claimed at its start,
 * src/send/send-inbox.ts) are acknowledged to their targets by a `watch-ack` timer. A notice pushed out of the
 * inbox by newer notifications (its bound, docs/limits.md) is put back: a notice is never lost to that bound.
 */
export function noticeConsumedAtRunEnd(host: SessionHost): void {
  const rows = host.sql
    .exec<WatchingRow>(
      "SELECT * FROM watching WHERE state = 'delivered' ORDER BY updated_at LIMIT ?",
      NOTICES_PER_RUN_END,
    )
    .toArray();
  const now = Date.now();
  for (const r of rows) {
    const inbox = inboxByKey(host, r.inbox_key);
    if (!inbox) {
      insertNotice(
        host,
        { target: r.target_key, shownTarget: displayKey(r.target_key), lastSeen: r.last_seen, notified: r.notified },
        r.inbox_key,
      );
      continue;
    }
    if (inbox.state !== "consumed") continue;
    host.sql.exec("UPDATE watching SET state = 'consumed', updated_at = ? WHERE target_key = ?", now, r.target_key);
    host.timers.set(WATCH_ACK_TIMER, r.target_key, now, { incarnation: r.incarnation, notified: r.notified });
  }
}

/** The `watch-ack` timer: tell the target its notice was read. A throw is retried (docs/timers.md). */
export async function sendAck(host: SessionHost, timer: TimerRow): Promise<void> {
  const p = JSON.parse(timer.payload ?? "{}") as { incarnation: string; notified: number };
  await callExtension(host.bindings.SESSIONS.getByName(timer.ref), "watchers", "consumed", {
    watcher: host.key,
    incarnation: p.incarnation,
    notified: p.notified,
  });
  host.storage.transactionSync(() => {
    // Only this notice's row: a fresh notice the target opened meanwhile may already be here, `delivered`.
    host.sql.exec(
      "DELETE FROM watching WHERE target_key = ? AND notified = ? AND state = 'consumed'",
      timer.ref,
      p.notified,
    );
    if (host.timers.get(WATCH_ACK_TIMER, timer.ref)?.payload === timer.payload)
      host.timers.clear(WATCH_ACK_TIMER, timer.ref);
  });
}

import { displayKey } from "../keys";
import { callExtension, type SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { TimerRow } from "../session/timers";
import type { StateChange } from "./state-kinds";
import { readMarks } from "./state-log";
import { noticeConsumedAtRunEnd, receiveNotice, sendAck, WATCH_ACK_TIMER } from "./watch-notices";

/**
 * Watchers of a session and their change notices (docs/events.md, "Watchers and notices"). The target keeps
 * one row per watcher (`watchers`, src/session/schema.ts): `last_seen` (the version the watcher reconciled
 * to), `notified` (the version its open notice covers, frozen while the notice is pending), `material` (the
 * newest notify-eligible change). OpenClaw keeps its pending notices in process memory; here every step is a
 * row written in the transaction that causes it:
 *
 *  1. a notify-eligible change by another actor opens one notice per watcher without one (`pending`, a
 *     `watch-notice` timer in the same transaction as the change's event);
 *  2. the timer delivers it into the watcher's send inbox as a notification (src/events/watch-notices.ts),
 *     retried with backoff; after the attempt limit the watcher row is `dead` (docs/timers.md);
 *  3. when a turn of the watcher has read it, the watcher's `watch-ack` timer tells the target (`consumed`):
 *     `last_seen` moves to the frozen `notified`, and if more changes arrived, one fresh notice opens.
 * Each step is idempotent on (watcher, notified), so a step repeated after an eviction repeats nothing.
 */

export const WATCH_NOTICE_TIMER = "watch-notice";
/** Watchers one session keeps (docs/limits.md): a change's fan-out is bounded by it; beyond, `watched: false`. */
export const MAX_WATCHERS_PER_TARGET = 100;

/**
 * Which state changes notify (docs/events.md): a person's direct message (OpenClaw's `human_direct_message`),
 * and another session's message (`agent_message`, ours). Its actor: a session's key, or "human" — never a
 * session key, so never the watcher itself. OpenClaw's `goal_changed` and `upstream_missing` have no
 * counterpart here; runs ending, children, compaction and tasks are the session's own work and never notify.
 */
function notifyingActor(change: StateChange): string | null {
  if (change.kind === "human_direct_message") return `human:${change.actorId ?? ""}`;
  if (change.kind === "agent_message") return change.actorId ?? "agent:unknown";
  return null;
}

type WatcherRow = {
  watcher_key: string;
  last_seen: number;
  notified: number;
  material: number;
  pending: number;
  state: "live" | "dead";
};

function rowOf(host: SessionHost, watcher: string): WatcherRow | undefined {
  return host.sql.exec<WatcherRow>("SELECT * FROM watchers WHERE watcher_key = ?", watcher).toArray()[0];
}

/** Inside the caller's transaction: the watcher's notice covers changes up to `notified`; its delivery is due now. */
function openNotice(host: SessionHost, watcher: string, lastSeen: number, notified: number, now: number): void {
  host.sql.exec(
    "UPDATE watchers SET last_seen = ?, notified = ?, pending = 1, updated_at = ? WHERE watcher_key = ?",
    lastSeen,
    notified,
    now,
    watcher,
  );
  // The payload names the notice, so a delivery that returns after a newer notice opened never clears that one's timer.
  host.timers.set(WATCH_NOTICE_TIMER, watcher, now, { notified });
}

/** Inside the change's transaction (the extension's `onStateChange`). At most MAX_WATCHERS_PER_TARGET rows. */
function onStateChange(host: SessionHost, seq: number, change: StateChange): void {
  const actor = notifyingActor(change);
  if (actor === null) return;
  const now = Date.now();
  // Self-caused changes never notify: the watcher that sent the message is skipped.
  const rows = host.sql
    .exec<{ watcher_key: string; pending: number; last_seen: number }>(
      "SELECT watcher_key, pending, last_seen FROM watchers WHERE watcher_key <> ? LIMIT ?",
      actor,
      MAX_WATCHERS_PER_TARGET,
    )
    .toArray();
  if (rows.length === 0) return;
  host.sql.exec(
    "UPDATE watchers SET material = MAX(material, ?), updated_at = ? WHERE watcher_key <> ?",
    seq,
    now,
    actor,
  );
  // One pending notice per watcher: while one is open its `notified` stays frozen; only `material` moves.
  for (const r of rows) if (!r.pending) openNotice(host, r.watcher_key, r.last_seen, seq, now);
}

/** The `watch-notice` timer: deliver the watcher's open notice. A throw is retried (docs/timers.md). */
async function deliverNotice(host: SessionHost, timer: TimerRow): Promise<void> {
  const row = host.meta ? rowOf(host, timer.ref) : undefined;
  const { notified } = JSON.parse(timer.payload ?? "{}") as { notified?: number };
  if (!row?.pending || row.notified !== notified || row.state !== "live" || !host.meta) {
    host.storage.transactionSync(() => host.timers.clear(WATCH_NOTICE_TIMER, timer.ref));
    return;
  }
  const r = await callExtension(host.bindings.SESSIONS.getByName(row.watcher_key), "watchers", "notice", {
    target: host.key,
    shownTarget: displayKey(host.key),
    incarnation: host.meta.sessionId,
    lastSeen: row.last_seen,
    notified: row.notified,
  });
  host.storage.transactionSync(() => {
    // A watcher session that does not exist (deleted, never written) has no turn to read it: it stops watching.
    if (r === "gone")
      host.sql.exec("DELETE FROM watchers WHERE watcher_key = ? AND notified = ?", row.watcher_key, notified);
    if (host.timers.get(WATCH_NOTICE_TIMER, timer.ref)?.payload === timer.payload)
      host.timers.clear(WATCH_NOTICE_TIMER, timer.ref);
  });
}

const watchersRpc = {
  /**
   * A session starts watching this one (sessions_send `watch`, after its message was admitted): from the
   * current state version, so no earlier change ever notifies it. Watching again keeps the cursor.
   */
  register: async (host: SessionHost, arg: { watcher: string }): Promise<{ watched: boolean }> => {
    if (!host.hasStorage || !host.meta || arg.watcher === host.key) return { watched: false };
    const r = host.storage.transactionSync((): { watched: boolean } => {
      const known = rowOf(host, arg.watcher);
      if (known) {
        // Watching again keeps the cursor; a pending notice is sent again (a watcher session deleted and created
        // again lost it; one that holds it takes the repeat as a no-op), and a dead delivery gets a new budget.
        if (known.pending) {
          host.sql.exec("UPDATE watchers SET state = 'live' WHERE watcher_key = ?", arg.watcher);
          host.timers.set(WATCH_NOTICE_TIMER, arg.watcher, Date.now(), { notified: known.notified });
        }
        return { watched: true };
      }
      const n = host.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM watchers").one().n;
      if (n >= MAX_WATCHERS_PER_TARGET) return { watched: false };
      const head = readMarks(host.sql).head;
      const now = Date.now();
      host.sql.exec(
        "INSERT INTO watchers (watcher_key, last_seen, notified, material, pending, state, created_at, updated_at) VALUES (?, ?, ?, ?, 0, 'live', ?, ?)",
        arg.watcher,
        head,
        head,
        head,
        now,
        now,
      );
      return { watched: true };
    });
    await host.timers.arm();
    return r;
  },
  /** The watcher's side: a notice for it (from the target's `watch-notice` timer). */
  notice: receiveNotice,
  /**
   * A turn of `watcher` read the notice covering `notified`: its cursor advances there, and one fresh notice
   * opens for the changes that arrived meanwhile. A repeat (an ack retried after an eviction) changes nothing.
   */
  consumed: async (host: SessionHost, arg: { watcher: string; incarnation: string; notified: number }) => {
    // A target deleted (or created again) since: its watchers went with it; nothing to create by asking.
    if (!host.hasStorage || host.meta?.sessionId !== arg.incarnation) return;
    host.storage.transactionSync(() => {
      const row = rowOf(host, arg.watcher);
      if (!row?.pending || row.notified !== arg.notified) return;
      if (row.material > row.notified) openNotice(host, arg.watcher, row.notified, row.material, Date.now());
      else {
        host.sql.exec(
          "UPDATE watchers SET last_seen = notified, pending = 0, updated_at = ? WHERE watcher_key = ?",
          Date.now(),
          arg.watcher,
        );
        host.timers.clear(WATCH_NOTICE_TIMER, arg.watcher);
      }
    });
    await host.timers.arm();
  },
  /** This session's watchers and their cursors (tests, operators). Bounded by MAX_WATCHERS_PER_TARGET. */
  list: (host: SessionHost): WatcherRow[] =>
    host.hasStorage ? host.sql.exec<WatcherRow>("SELECT * FROM watchers ORDER BY watcher_key").toArray() : [],
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    watchers: typeof watchersRpc;
  }
}

export const watchersExtension: SessionExtension = {
  name: "watchers",
  rpc: watchersRpc,
  onStateChange,
  // The watcher's side: a notice read by the turn that just ended is acknowledged (src/events/watch-notices.ts).
  onRunEnded: (host) => noticeConsumedAtRunEnd(host),
  timers: {
    [WATCH_NOTICE_TIMER]: {
      // The visible end: after the attempts the watcher row is `dead` (listed with the dead timers); further
      // changes only move `material`; an operator retry delivers the frozen notice and revives the row.
      onDead: (host, dead) => {
        host.sql.exec("UPDATE watchers SET state = 'dead', updated_at = ? WHERE watcher_key = ?", Date.now(), dead.ref);
      },
      revive: (host, dead) => {
        host.sql.exec("UPDATE watchers SET state = 'live', updated_at = ? WHERE watcher_key = ?", Date.now(), dead.ref);
        return true;
      },
    },
    [WATCH_ACK_TIMER]: {},
  },
  onTimer: (host, timer) => (timer.kind === WATCH_NOTICE_TIMER ? deliverNotice(host, timer) : sendAck(host, timer)),
};

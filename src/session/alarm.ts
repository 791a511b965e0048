import { log } from "../log";
import { DEADLINE_TIMER, INDEX_TIMER, LEASE_TIMER, PUMP_TIMER, SWEEP_TIMER } from "./core-timers";
import type { SessionExtensions } from "./extensions";
import type { SessionHost } from "./host";
import type { IndexSync } from "./index-sync";
import { nextPruneDue, PRUNE_REF, PRUNE_TIMER, pruneFinished } from "./retention";
import { sweep } from "./run-audit";
import type { RunQueue } from "./run-queue";
import { runDueTimers } from "./timer-policy";
import type { TimerRow } from "./timers";

/** What the alarm drives: the run queue, the registry row and the extensions' timers. */
export interface AlarmParts {
  queue: RunQueue;
  indexSync: IndexSync;
  extensions: SessionExtensions;
}

/**
 * The session object's one alarm: run every due timer (failures retried with backoff up to each kind's
 * attempt limit, then the timer is dead; src/session/timer-policy.ts), arm retention, re-arm for the next.
 */
export async function runAlarm(host: SessionHost, parts: AlarmParts): Promise<void> {
  // A fired alarm is no longer set: the time `arm` remembers is stale (src/session/timers.ts).
  host.timers.forgetArmed();
  if (!host.hasStorage) return;
  await runDueTimers(host, (t) => onTimer(host, parts, t));
  if (!host.hasStorage) return;
  schedulePrune(host, parts.extensions);
  await host.timers.arm();
}

/**
 * Dispatch one due timer: the object's own kinds (src/session/core-timers.ts) here, every other kind to
 * the extension that declared it. Each handler deletes or reschedules its row in the transaction of its effect.
 */
async function onTimer(host: SessionHost, { queue, indexSync, extensions }: AlarmParts, t: TimerRow): Promise<void> {
  switch (t.kind) {
    case PUMP_TIMER:
      host.timers.clear(PUMP_TIMER, "queue");
      queue.kick();
      return;
    case LEASE_TIMER:
      return queue.onLeaseExpired(t.ref);
    case DEADLINE_TIMER:
      return queue.onDeadline(t);
    case PRUNE_TIMER: {
      const next = pruneFinished(host.sql, extensions.finishedFlowStates(), Date.now());
      if (next === null) host.timers.clear(PRUNE_TIMER, PRUNE_REF);
      else host.timers.set(PRUNE_TIMER, PRUNE_REF, next);
      return;
    }
    case SWEEP_TIMER:
      await sweep(host, extensions, queue);
      return;
    case INDEX_TIMER:
      // sync clears the row only after the write succeeded; a failure is retried by the alarm.
      await indexSync.sync();
      return;
    default:
      if (await extensions.onTimer(host, t)) return;
      // A row written before its kind was removed (an upgrade): nothing runs it any more.
      log.warn("unknown_timer_kind", { sessionKey: host.key, kind: t.kind, ref: t.ref });
      host.timers.clear(t.kind, t.ref);
  }
}

/**
 * Arm the retention timer when finished rows exist and it is not armed yet. Checked on the alarm, which
 * every flow and delivery step goes through; a session with nothing finished gets no extra alarm.
 */
function schedulePrune(host: SessionHost, extensions: SessionExtensions): void {
  if (host.timers.get(PRUNE_TIMER, PRUNE_REF)) return;
  const next = nextPruneDue(host.sql, extensions.finishedFlowStates());
  if (next !== null) host.timers.set(PRUNE_TIMER, PRUNE_REF, next);
}

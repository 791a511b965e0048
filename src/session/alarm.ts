import { log } from "../log";
import { finishedFlowStates, onExtensionTimer } from "./extensions";
import type { SessionHost } from "./host";
import type { IndexSync } from "./index-sync";
import { nextPruneDue, PRUNE_REF, PRUNE_TIMER, pruneFinished } from "./retention";
import type { RunQueue } from "./run-queue";
import { runDueTimers } from "./timer-policy";
import type { TimerRow } from "./timers";

/**
 * The session object's one alarm: run every due timer (failures retried with backoff up to each kind's
 * attempt limit, then the timer is dead; src/session/timer-policy.ts), arm retention, re-arm for the next.
 */
export async function runAlarm(host: SessionHost, queue: RunQueue, indexSync: IndexSync): Promise<void> {
  // A fired alarm is no longer set: the time `arm` remembers is stale (src/session/timers.ts).
  host.timers.forgetArmed();
  if (!host.hasStorage) return;
  await runDueTimers(host, (t) => onTimer(host, queue, indexSync, t));
  if (!host.hasStorage) return;
  schedulePrune(host);
  await host.timers.arm();
}

/** Dispatch one due timer. Each handler deletes or reschedules its row in the transaction of its effect. */
async function onTimer(host: SessionHost, queue: RunQueue, indexSync: IndexSync, t: TimerRow): Promise<void> {
  switch (t.kind) {
    case "pump":
      host.timers.clear("pump", "queue");
      queue.kick();
      return;
    case "lease":
      return queue.onLeaseExpired(t.ref);
    case "deadline":
      return queue.onDeadline(t);
    case PRUNE_TIMER: {
      const next = pruneFinished(host.sql, finishedFlowStates(), Date.now());
      if (next === null) host.timers.clear(PRUNE_TIMER, PRUNE_REF);
      else host.timers.set(PRUNE_TIMER, PRUNE_REF, next);
      return;
    }
    case "index":
      // sync clears the row only after the write succeeded; a failure is retried by the alarm.
      await indexSync.sync();
      return;
    default:
      if (await onExtensionTimer(host, t)) return;
      log.warn("unknown_timer_kind", { sessionKey: host.key, kind: t.kind, ref: t.ref });
      host.timers.clear(t.kind, t.ref);
  }
}

/**
 * Arm the retention timer when finished rows exist and it is not armed yet. Checked on the alarm, which
 * every flow and delivery step goes through; a session with nothing finished gets no extra alarm.
 */
function schedulePrune(host: SessionHost): void {
  if (host.timers.get(PRUNE_TIMER, PRUNE_REF)) return;
  const next = nextPruneDue(host.sql, finishedFlowStates());
  if (next !== null) host.timers.set(PRUNE_TIMER, PRUNE_REF, next);
}

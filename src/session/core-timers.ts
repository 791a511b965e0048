import { PRUNE_TIMER } from "./retention";

/**
 * The session object's own timer kinds, run by its alarm (src/session/alarm.ts) with the default attempt
 * policy (docs/timers.md). Extensions declare theirs in their `timers` (src/session/extensions.ts).
 */

/** Start the next queued run (ref `queue`). */
export const PUMP_TIMER = "pump";
/** A running run whose executor may have been lost to an eviction (ref: the run id). */
export const LEASE_TIMER = "lease";
/** A run's timeout (ref: the run id). */
export const DEADLINE_TIMER = "deadline";
/** Write the session's registry row (ref `sync`; src/session/index-sync.ts). */
export const INDEX_TIMER = "index";
/** Audit the session's open runs and flows while it has any (ref `runs`; src/session/run-audit.ts). */
export const SWEEP_TIMER = "sweep";

export const CORE_TIMER_KINDS = [
  PUMP_TIMER,
  LEASE_TIMER,
  DEADLINE_TIMER,
  INDEX_TIMER,
  PRUNE_TIMER,
  SWEEP_TIMER,
] as const;

import { backoffDelayMs } from "../backoff";
import { log } from "../log";
import type { TimerRow, Timers } from "./timers";

/**
 * Every timer gives up (docs/timers.md). A due timer whose handler throws is retried with exponential
 * backoff and jitter up to its kind's attempt limit; after the last attempt it is moved to
 * `dead_timers` (listed over GET /v1/sessions/{key}/timers/dead), its kind's dead handlers end what it
 * was driving (a flow records the error), and one structured log line says so — never a retry every
 * minute forever.
 */

export interface TimerPolicy {
  /** Failed runs of the handler before the timer is dead (the first run counts). */
  maxAttempts: number;
  /** Delay before the second attempt; doubles per failure up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

/** About 20 minutes of retries in all: long enough for a restart or a brief outage of another object. */
export const DEFAULT_TIMER_POLICY: TimerPolicy = { maxAttempts: 8, baseDelayMs: 2_000, maxDelayMs: 5 * 60_000 };
/** Dead timers kept per session (oldest dropped first), so a session failing for weeks stays bounded. */
export const MAX_DEAD_TIMERS = 100;
/** Longest error text stored with a failing or dead timer. */
const MAX_ERROR_CHARS = 1_000;

/** What a timer-driving object offers this module (the session object; a narrow type avoids an import cycle). */
export interface TimerHost {
  readonly key: string;
  readonly hasStorage: boolean;
  readonly sql: SqlStorage;
  readonly storage: DurableObjectStorage;
  readonly timers: Timers;
  /** The kinds this object's timers may have (src/session/extensions.ts builds them from the extension list). */
  readonly timerKinds: TimerKinds;
}

export interface DeadTimer {
  kind: string;
  ref: string;
  payload: string | null;
  attempts: number;
  lastError: string;
  firstFailedAt: number;
  diedAt: number;
}

/**
 * A timer kind as its owner declares it (SessionExtension `timers`): its limits, what ends when it dies and
 * how an operator retry revives it. `H` is the object whose alarm runs the timer (the session object), so
 * handlers use its API. Method syntax on purpose: a kind declared for the session object's host is held
 * in the list of all kinds without a cast — only the object that declares a kind runs its timers.
 */
export interface TimerKind<H extends TimerHost = TimerHost> {
  policy?: Partial<TimerPolicy>;
  /**
   * Synchronous, inside the transaction that moves the timer to `dead_timers`: end what the timer was
   * driving (a flow gets its error) so the two can never disagree.
   */
  onDead?(host: H, dead: DeadTimer): void;
  /** Synchronous, inside the operator's retry transaction: put back what `onDead` ended; false = not retryable. */
  revive?(host: H, dead: DeadTimer): boolean;
}

/** Every timer kind a session object knows: the object's own and those its extensions declare. */
export class TimerKinds {
  constructor(private readonly kinds: Readonly<Record<string, TimerKind>>) {}

  has(kind: string): boolean {
    return Object.hasOwn(this.kinds, kind);
  }

  policy(kind: string): TimerPolicy {
    const own = this.has(kind) ? this.kinds[kind].policy : undefined;
    return own ? { ...DEFAULT_TIMER_POLICY, ...own } : DEFAULT_TIMER_POLICY;
  }

  /**
   * A known kind whose death ends nothing, or that can put back what its death ended. A kind no longer
   * declared (removed in an upgrade) is not: nothing would run it.
   */
  isRetryable(kind: string): boolean {
    const k = this.get(kind);
    return k !== undefined && (!k.onDead || Boolean(k.revive));
  }

  get(kind: string): TimerKind | undefined {
    return this.has(kind) ? this.kinds[kind] : undefined;
  }

  /** Every kind, for the documentation check (test/recipes.test.ts). */
  names(): string[] {
    return Object.keys(this.kinds);
  }
}

/**
 * Delay before the next attempt after `failures` failed ones: exponential, capped, with "equal jitter"
 * (half fixed, half random) so timers that failed together — a requester down for many children — do
 * not all retry in the same second.
 */
export function retryDelayMs(policy: TimerPolicy, failures: number, random: () => number = Math.random): number {
  return backoffDelayMs({ ...policy, jitter: "equal" }, failures, random);
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message || err.name : String(err);
  return (text || "timer failed").slice(0, MAX_ERROR_CHARS);
}

/**
 * Run every due timer through `dispatch`. One failing timer never blocks the others: its failure is
 * recorded (retry or death) and the loop goes on.
 */
export async function runDueTimers(host: TimerHost, dispatch: (t: TimerRow) => Promise<void>): Promise<void> {
  for (const t of host.timers.due(Date.now())) {
    // A timer may delete the session (sub-agent archive/cleanup): its storage is gone, stop here.
    if (!host.hasStorage) return;
    try {
      await dispatch(t);
    } catch (err) {
      if (host.hasStorage) recordTimerFailure(host, t, err);
    }
  }
}

/** The handler of `t` threw: schedule the next attempt, or, after the last one, move the timer to `dead_timers`. */
export function recordTimerFailure(host: TimerHost, t: TimerRow, err: unknown): "retry" | "dead" | "gone" {
  const policy = host.timerKinds.policy(t.kind);
  const error = errorText(err);
  const now = Date.now();
  const died: { timer?: DeadTimer } = {};
  const outcome = host.storage.transactionSync((): "retry" | "dead" | "gone" => {
    // Re-read: the handler may have rescheduled or removed its row before it threw.
    const cur = host.timers.get(t.kind, t.ref);
    if (!cur) return "gone";
    const attempts = cur.attempts + 1;
    const firstFailedAt = cur.failing_since ?? now;
    if (attempts < policy.maxAttempts) {
      const due = now + retryDelayMs(policy, attempts);
      host.sql.exec(
        "UPDATE timers SET attempts = ?, due_at = ?, last_error = ?, failing_since = ? WHERE kind = ? AND ref = ?",
        attempts,
        due,
        error,
        firstFailedAt,
        t.kind,
        t.ref,
      );
      log.warn("timer_retry", {
        sessionKey: host.key,
        kind: t.kind,
        ref: t.ref,
        attempt: attempts,
        maxAttempts: policy.maxAttempts,
        nextAt: due,
        error,
      });
      return "retry";
    }
    const dead: DeadTimer = {
      kind: t.kind,
      ref: t.ref,
      payload: cur.payload,
      attempts,
      lastError: error,
      firstFailedAt,
      diedAt: now,
    };
    died.timer = dead;
    host.sql.exec(
      `INSERT INTO dead_timers (kind, ref, payload, attempts, last_error, first_failed_at, died_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (kind, ref) DO UPDATE SET payload = excluded.payload, attempts = excluded.attempts, last_error = excluded.last_error,
         first_failed_at = excluded.first_failed_at, died_at = excluded.died_at`,
      t.kind,
      t.ref,
      cur.payload,
      attempts,
      error,
      firstFailedAt,
      now,
    );
    host.timers.clear(t.kind, t.ref);
    host.sql.exec(
      "DELETE FROM dead_timers WHERE rowid IN (SELECT rowid FROM dead_timers ORDER BY died_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
      MAX_DEAD_TIMERS,
    );
    const kind = host.timerKinds.get(t.kind);
    if (kind?.onDead) {
      // A throwing handler must not roll the death back (the timer would then retry forever): log it, keep the death.
      try {
        kind.onDead(host, dead);
      } catch (handlerErr) {
        log.error("timer_dead_handler_failed", {
          sessionKey: host.key,
          kind: t.kind,
          ref: t.ref,
          error: errorText(handlerErr),
        });
      }
    }
    return "dead";
  });
  if (died.timer) {
    const { payload: _payload, ...fields } = died.timer;
    log.error("timer_dead", { sessionKey: host.key, ...fields });
  }
  return outcome;
}

export interface DeadTimerView {
  kind: string;
  ref: string;
  attempts: number;
  lastError: string;
  firstFailedAt: number;
  diedAt: number;
  /** An operator may re-queue it (POST …/timers/dead/{kind}/{ref}/retry). */
  retryable: boolean;
}

type DeadRow = {
  kind: string;
  ref: string;
  payload: string | null;
  attempts: number;
  last_error: string;
  first_failed_at: number;
  died_at: number;
};

const deadOf = (r: DeadRow): DeadTimer => ({
  kind: r.kind,
  ref: r.ref,
  payload: r.payload,
  attempts: r.attempts,
  lastError: r.last_error,
  firstFailedAt: r.first_failed_at,
  diedAt: r.died_at,
});
const viewOf = (kinds: TimerKinds, d: DeadTimer): DeadTimerView => ({
  kind: d.kind,
  ref: d.ref,
  attempts: d.attempts,
  lastError: d.lastError,
  firstFailedAt: d.firstFailedAt,
  diedAt: d.diedAt,
  retryable: kinds.isRetryable(d.kind),
});

/** Dead timers of a session, newest first. */
export function listDeadTimers(host: TimerHost, limit: number): DeadTimerView[] {
  if (!host.hasStorage) return [];
  return host.sql
    .exec<DeadRow>("SELECT * FROM dead_timers ORDER BY died_at DESC, rowid DESC LIMIT ?", limit)
    .toArray()
    .map((r) => viewOf(host.timerKinds, deadOf(r)));
}

/**
 * Re-queue a dead timer (due now, a fresh attempt budget), after its kind's reviver put back what the
 * death ended. Null when there is no such dead timer; `retried: false` when its kind cannot be revived.
 */
export function retryDeadTimer(
  host: TimerHost,
  kind: string,
  ref: string,
): { timer: DeadTimerView; retried: boolean } | null {
  if (!host.hasStorage) return null;
  return host.storage.transactionSync(() => {
    const row = host.sql.exec<DeadRow>("SELECT * FROM dead_timers WHERE kind = ? AND ref = ?", kind, ref).toArray()[0];
    if (!row) return null;
    const dead = deadOf(row);
    const kinds = host.timerKinds;
    if (!kinds.isRetryable(kind)) return { timer: viewOf(kinds, dead), retried: false };
    const revive = kinds.get(kind)?.revive;
    if (revive && !revive(host, dead)) return { timer: viewOf(kinds, dead), retried: false };
    host.sql.exec("DELETE FROM dead_timers WHERE kind = ? AND ref = ?", kind, ref);
    host.timers.set(kind, ref, Date.now(), dead.payload === null ? undefined : JSON.parse(dead.payload));
    return { timer: viewOf(kinds, dead), retried: true };
  });
}

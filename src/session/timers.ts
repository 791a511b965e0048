/**
 * Timers behind one multiplexed alarm (docs/architecture.md, "Durable-state rules"; docs/timers.md). A timer is a row `(kind, ref)`;
 * writing one in the same transaction as the state that needs it is what makes follow-ups
 * restart-safe. The alarm is always set to the earliest due row.
 */
export type TimerRow = {
  kind: string;
  ref: string;
  due_at: number;
  payload: string | null;
  /** Failed runs of its handler so far (reset when the timer is set anew); see timer-policy.ts. */
  attempts: number;
  last_error: string | null;
  /** When the current run of failures began. */
  failing_since: number | null;
};

export class Timers {
  /**
   * The alarm time this instance last set (null: none), so `arm` awaits storage only when the earliest
   * due time moved. Undefined until read: after a start (an eviction loses it with the instance) and
   * whenever the alarm changed behind `arm` (it fired, or storage was cleared: `forgetArmed`).
   */
  private armedAt: number | null | undefined = undefined;

  constructor(
    private readonly sql: SqlStorage,
    private readonly storage: DurableObjectStorage,
    /** Whether a kind is declared (src/session/core-timers.ts, or an extension's `timers`). */
    private readonly isDeclared: (kind: string) => boolean,
  ) {}

  /** Upsert a timer. `keepEarlier` keeps an existing earlier due time (coalescing). */
  set(kind: string, ref: string, dueAt: number, payload?: unknown, opts: { keepEarlier?: boolean } = {}): void {
    // A row of an undeclared kind would reach the alarm with no handler and be dropped unrun: refuse to write it.
    if (!this.isDeclared(kind))
      throw new Error(
        `Timer kind "${kind}" is not declared: add it to its extension's timers (AGENTS.md, "Add a timer kind")`,
      );
    const p = payload === undefined ? null : JSON.stringify(payload);
    if (opts.keepEarlier) {
      this.sql.exec(
        `INSERT INTO timers (kind, ref, due_at, payload) VALUES (?, ?, ?, ?)
         ON CONFLICT (kind, ref) DO UPDATE SET due_at = MIN(due_at, excluded.due_at), payload = excluded.payload`,
        kind,
        ref,
        dueAt,
        p,
      );
    } else {
      this.sql.exec(
        `INSERT INTO timers (kind, ref, due_at, payload) VALUES (?, ?, ?, ?)
         ON CONFLICT (kind, ref) DO UPDATE SET due_at = excluded.due_at, payload = excluded.payload, attempts = 0, last_error = NULL, failing_since = NULL`,
        kind,
        ref,
        dueAt,
        p,
      );
    }
  }

  clear(kind: string, ref: string): void {
    this.sql.exec("DELETE FROM timers WHERE kind = ? AND ref = ?", kind, ref);
  }

  get(kind: string, ref: string): TimerRow | undefined {
    return this.sql.exec<TimerRow>("SELECT * FROM timers WHERE kind = ? AND ref = ?", kind, ref).toArray()[0];
  }

  /** Rows due at or before `now` (`<=`, so a row due exactly now is never missed). */
  due(now: number, limit = 100): TimerRow[] {
    return this.sql
      .exec<TimerRow>("SELECT * FROM timers WHERE due_at <= ? ORDER BY due_at LIMIT ?", now, limit)
      .toArray();
  }

  /**
   * Rows of these kinds due now, for an owner that works on its own timers right away (after a run ended,
   * after a callback) instead of waiting for the alarm; the alarm still runs whatever this leaves.
   */
  dueOfKinds(kinds: readonly string[], now: number, limit = 20): TimerRow[] {
    return this.sql
      .exec<TimerRow>(
        `SELECT * FROM timers WHERE kind IN (${kinds.map(() => "?").join(", ")}) AND due_at <= ? ORDER BY due_at LIMIT ?`,
        ...kinds,
        now,
        limit,
      )
      .toArray();
  }

  count(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM timers").one().n;
  }

  /**
   * Point the alarm at the earliest timer (or clear it). Call after any transaction that touched timers.
   * Most calls (an enqueue into a busy session) leave the earliest due time where it was and return
   * without touching storage (test/send/send-path.test.ts).
   */
  async arm(): Promise<void> {
    if (this.armedAt === undefined) this.armedAt = await this.storage.getAlarm();
    // Read after the await: concurrent callers each set what the table says when they issue the call,
    // and the calls apply in issue order, so the last one issued carries the latest earliest time.
    const due = this.sql.exec<{ due: number | null }>("SELECT MIN(due_at) AS due FROM timers").one().due;
    // setAlarm refuses a time ≤ 0, and a row may be due "at once" as 0 (the search feed's migration writes
    // its timer so, src/session/schema.ts): any past time fires at once, so 1 ms says the same.
    const next = due === null ? null : Math.max(1, due);
    if (next === this.armedAt) return;
    this.armedAt = next;
    try {
      await (next === null ? this.storage.deleteAlarm() : this.storage.setAlarm(next));
    } catch (err) {
      this.armedAt = undefined;
      throw err;
    }
  }

  /** The alarm changed behind `arm` (it fired and is gone, or storage was cleared): read it before the next decision. */
  forgetArmed(): void {
    this.armedAt = undefined;
  }
}

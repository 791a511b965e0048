/**
 * The sub-agent lane: at most `agents.defaults.subagents.maxConcurrent` (default 8) sub-agent task runs
 * run at once across the gateway; the others wait their turn in FIFO order (docs/subagent-lane.md).
 *
 * One object holds the lane (`LANE_OBJECT` of the SUBAGENT_LANE namespace, src/lane/subagent-lane-object.ts):
 * one row per child that holds or waits for a slot. Every call is idempotent — a child asks again
 * after an eviction or a lost answer and gets the same slot — and a release hands the freed slots to
 * the oldest waiters in the same transaction, so a slot is never lost between two children.
 */

export const LANE_OBJECT = "lane:subagent";
/** Waiting children the lane keeps; past it a child is told to ask again later (it polls, docs/subagent-lane.md). */
export const MAX_LANE_WAITING = 10_000;
/** A running slot older than this is checked with its child when the lane is full (at most STALE_CHECKS per ask). */
export const STALE_CHECK_MS = 60_000;
export const STALE_CHECKS = 3;

/** The lane's table (created by the lane object's migrations; the registry's legacy lane instance made it too). */
export const LANE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS lane_slots (
    child_key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS lane_slots_state ON lane_slots (state, seq);
`;

/** One row of the lane, as a legacy lane instance hands it over (src/lane/subagent-lane-object.ts). */
export type LaneSlot = {
  child_key: string;
  state: string;
  seq: number;
  updated_at: number;
};

export interface LaneAnswer {
  granted: boolean;
  /** Running task runs and waiting children after this call. */
  running: number;
  waiting: number;
}

/** The lane's rows and their transitions; its object has created the table (LANE_SCHEMA) before any call. */
export class SubagentLane {
  constructor(
    private readonly sql: SqlStorage,
    private readonly storage: DurableObjectStorage,
  ) {}

  /** Ask for a slot for `childKey`: granted now, or queued behind the children that asked before it. */
  acquire(childKey: string, max: number): LaneAnswer {
    return this.storage.transactionSync(() => {
      const known = this.sql.exec("SELECT 1 FROM lane_slots WHERE child_key = ?", childKey).toArray().length > 0;
      if (!known && this.count("waiting") < MAX_LANE_WAITING) {
        const seq = this.sql.exec<{ s: number }>("SELECT COALESCE(MAX(seq), 0) + 1 AS s FROM lane_slots").one().s;
        this.sql.exec(
          "INSERT INTO lane_slots (child_key, state, seq, updated_at) VALUES (?, 'waiting', ?, ?)",
          childKey,
          seq,
          Date.now(),
        );
      }
      this.promote(max);
      const state = this.sql
        .exec<{ state: string }>("SELECT state FROM lane_slots WHERE child_key = ?", childKey)
        .toArray()[0]?.state;
      return { granted: state === "running", running: this.count("running"), waiting: this.count("waiting") };
    });
  }

  /** The child's task run ended (or it was deleted while waiting): free its place; returns the children granted a slot by it. */
  release(childKey: string, max: number): string[] {
    return this.storage.transactionSync(() => {
      this.sql.exec("DELETE FROM lane_slots WHERE child_key = ?", childKey);
      return this.promote(max);
    });
  }

  /** Fill free slots with the oldest waiters. A lowered `max` frees no running slot: they drain as their runs end. */
  private promote(max: number): string[] {
    const free = max - this.count("running");
    if (free <= 0) return [];
    const next = this.sql
      .exec<{ child_key: string }>(
        "SELECT child_key FROM lane_slots WHERE state = 'waiting' ORDER BY seq LIMIT ?",
        free,
      )
      .toArray()
      .map((r) => r.child_key);
    const now = Date.now();
    for (const key of next)
      this.sql.exec("UPDATE lane_slots SET state = 'running', updated_at = ? WHERE child_key = ?", now, key);
    return next;
  }

  /**
   * Running slots held longer than STALE_CHECK_MS, oldest first: candidates to check when the lane is full,
   * because a child deleted mid-task never gives its slot back itself.
   */
  oldRunning(limit: number): string[] {
    return this.sql
      .exec<{ child_key: string }>(
        "SELECT child_key FROM lane_slots WHERE state = 'running' AND updated_at < ? ORDER BY updated_at LIMIT ?",
        Date.now() - STALE_CHECK_MS,
        limit,
      )
      .toArray()
      .map((r) => r.child_key);
  }

  /** A slot whose child no longer runs a task (deleted, or its release lost): drop it; returns the children it grants. */
  reap(childKey: string, max: number): string[] {
    return this.storage.transactionSync(() => {
      this.sql.exec("DELETE FROM lane_slots WHERE child_key = ? AND state = 'running'", childKey);
      return this.promote(max);
    });
  }

  private count(state: "running" | "waiting"): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM lane_slots WHERE state = ?", state).one().n;
  }

  /**
   * Rows handed over by the legacy lane instance (inside the caller's transaction): kept in their order
   * (seq), never over a row this lane already has.
   */
  adopt(rows: readonly LaneSlot[]): void {
    for (const r of rows)
      this.sql.exec(
        "INSERT INTO lane_slots (child_key, state, seq, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (child_key) DO NOTHING",
        r.child_key,
        r.state,
        r.seq,
        r.updated_at,
      );
  }
}

/**
 * One agent's sub-agent lane (docs/subagent-lane.md): the children spawned by that agent's sessions, in
 * spawn order, each `waiting` or `running`. Its object is `agentLaneName(agentId)` of the SUBAGENT_LANE
 * namespace (src/lane/subagent-lane-object.ts); no lane sees another agent's children.
 *
 * Where a running child's slot comes from depends on the configuration:
 * - `maxConcurrent` not set: the lane's own AGENT_LANE_LIMIT slots (per agent, nothing gateway-wide);
 * - `maxConcurrent` set: a lease of the slot bank (src/lane/slot-bank.ts), which holds exactly that many
 *   leases for the whole gateway. The lane keeps its leases in `lane_leases`; a running child is bound
 *   to one (`lease`).
 *
 * Every call is idempotent (a child asks again after an eviction or a lost answer and gets the same
 * place), and every transition that frees a slot hands it to the oldest waiter in the same transaction.
 */

/** The lane object of the agent whose sessions spawn the children (its token is the one that can flood it). */
export function agentLaneName(agentId: string): string {
  return `lane:agent:${agentId}`;
}

/** Largest `maxConcurrent` (the bank keeps one row per lease and a lane's view lists its leases). */
export const MAX_CONCURRENT_MAX = 1_000;
/** Running children per agent when `maxConcurrent` is not set (OpenClaw's default of 8, per agent here). */
export const AGENT_LANE_LIMIT = 8;
/** Waiting children one agent's lane keeps; past it a child is not queued and asks again on its backstop timer. */
export const MAX_AGENT_WAITING = 1_000;
/**
 * A lease a lane keeps for its agent's next children without asking the bank (bound to a waiter, or idle for the
 * next spawn) while the bank granted it less than this long ago and no other agent waits; then it goes back to the
 * bank, which hands it to the agent holding the fewest (docs/subagent-lane.md, "Fairness"). Bounds the bank's
 * traffic per lease (about two calls per term), not per spawn.
 */
export const LEASE_TERM_MS = 30_000;
/** A running child not heard of for this long is checked with its session while others wait (STALE_CHECKS per check). */
export const STALE_CHECK_MS = 60_000;
export const STALE_CHECKS = 3;

/** The lane's tables: one row per child, the bank leases it holds, leases it is giving back, and its own settings. */
export const LANE_TABLES = `
  ALTER TABLE lane_slots ADD COLUMN lease TEXT;
  ALTER TABLE lane_slots ADD COLUMN notified INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE lane_slots ADD COLUMN checked_at INTEGER NOT NULL DEFAULT 0;
  CREATE TABLE lane_leases (id TEXT PRIMARY KEY, granted_at INTEGER NOT NULL);
  CREATE TABLE lane_returns (id TEXT PRIMARY KEY, attempts INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE lane_state (k TEXT PRIMARY KEY, v TEXT NOT NULL);
`;
/** The first lane table (one gateway-wide lane used it before lanes were per agent; its columns are kept). */
export const LANE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS lane_slots (
    child_key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS lane_slots_state ON lane_slots (state, seq);
`;

/** Who the lane is and where its slots come from: sent with every call (the object keeps the last for its alarm). */
export interface LaneCaller {
  agentId: string;
  /** `maxConcurrent` when the configuration sets it (gateway-wide, through the bank); null: AGENT_LANE_LIMIT per agent. */
  gatewayMax: number | null;
}

export interface LaneAnswer {
  granted: boolean;
  /** Queued (false only when the agent's lane already holds MAX_AGENT_WAITING waiters). */
  queued: boolean;
  running: number;
  waiting: number;
}

/** A bank lease as the bank reports it (src/lane/slot-bank.ts). */
export interface Lease {
  id: string;
  grantedAt: number;
}

/** The rows of one agent's lane; its object has created the tables before any call. */
export class AgentLane {
  constructor(private readonly sql: SqlStorage) {}

  /** Queue `childKey` (once) and fill free slots; in the caller's transaction. Returns the children granted now. */
  enqueue(childKey: string, gatewayMax: number | null): { answer: LaneAnswer; granted: string[] } {
    const known = this.sql.exec("SELECT 1 FROM lane_slots WHERE child_key = ?", childKey).toArray().length > 0;
    if (!known && this.count("waiting") < MAX_AGENT_WAITING) {
      const seq = this.sql.exec<{ s: number }>("SELECT COALESCE(MAX(seq), 0) + 1 AS s FROM lane_slots").one().s;
      this.sql.exec(
        "INSERT INTO lane_slots (child_key, state, seq, updated_at, notified) VALUES (?, 'waiting', ?, ?, 1)",
        childKey,
        seq,
        Date.now(),
      );
    }
    const granted = this.promote(gatewayMax);
    const row = this.sql
      .exec<{ state: string }>("SELECT state FROM lane_slots WHERE child_key = ?", childKey)
      .toArray()[0];
    // The child asked, so it knows its answer: nothing to tell it.
    if (row?.state === "running") this.sql.exec("UPDATE lane_slots SET notified = 1 WHERE child_key = ?", childKey);
    return {
      answer: {
        granted: row?.state === "running",
        queued: row !== undefined,
        running: this.count("running"),
        waiting: this.count("waiting"),
      },
      granted: granted.filter((k) => k !== childKey),
    };
  }

  /**
   * The child's task ended (or it was deleted): drop its row. Its lease stays with this lane (for the next waiter, or
   * idle for the next spawn) while it may be kept (`keeps`), else it goes back to the bank (a `lane_returns` row,
   * sent by the object).
   * In the caller's transaction; returns the children granted by it.
   */
  remove(childKey: string, gatewayMax: number | null, onlyRunning = false): string[] {
    const row = this.sql
      .exec<{ state: string; lease: string | null }>(
        "SELECT state, lease FROM lane_slots WHERE child_key = ?",
        childKey,
      )
      .toArray()[0];
    if (!row || (onlyRunning && row.state !== "running")) return [];
    this.sql.exec("DELETE FROM lane_slots WHERE child_key = ?", childKey);
    if (row.lease) {
      const lease = this.sql
        .exec<{ granted_at: number }>("SELECT granted_at FROM lane_leases WHERE id = ?", row.lease)
        .toArray()[0];
      if (lease && !this.keeps(lease.granted_at)) this.giveBack(row.lease);
    }
    return this.promote(gatewayMax);
  }

  /** Fill free slots with the oldest waiters (a lowered limit frees no running slot: they drain as runs end). */
  promote(gatewayMax: number | null): string[] {
    const now = Date.now();
    if (gatewayMax === null) {
      // Leases from a time the configuration set maxConcurrent go back: the bank counts them until they do.
      for (const l of this.sql.exec<{ id: string }>("SELECT id FROM lane_leases").toArray()) this.giveBack(l.id);
      const free = AGENT_LANE_LIMIT - this.count("running");
      if (free <= 0) return [];
      const next = this.oldestWaiting(free);
      for (const key of next)
        this.sql.exec(
          "UPDATE lane_slots SET state = 'running', updated_at = ?, notified = 0 WHERE child_key = ?",
          now,
          key,
        );
      return next;
    }
    const unbound = this.sql
      .exec<{ id: string }>(
        "SELECT id FROM lane_leases WHERE id NOT IN (SELECT lease FROM lane_slots WHERE lease IS NOT NULL) ORDER BY granted_at",
      )
      .toArray()
      .map((r) => r.id);
    const next = this.oldestWaiting(unbound.length);
    for (const [i, key] of next.entries())
      this.sql.exec(
        "UPDATE lane_slots SET state = 'running', lease = ?, updated_at = ?, notified = 0 WHERE child_key = ?",
        unbound[i],
        now,
        key,
      );
    // Leases nobody here waits for stay idle for the next spawn while they may be kept; then they go back.
    const grantedAt = this.sql.exec<{ id: string; granted_at: number }>("SELECT id, granted_at FROM lane_leases");
    const at = new Map(grantedAt.toArray().map((r) => [r.id, r.granted_at]));
    for (const id of unbound.slice(next.length)) if (!this.keeps(at.get(id) ?? 0)) this.giveBack(id);
    return next;
  }

  /**
   * The bank's list of this agent's leases (the whole list, so a lost answer or push costs nothing). Leases
   * being given back stay given back; the caller promotes afterwards.
   */
  applyLeases(leases: readonly Lease[]): void {
    const returning = new Set(this.returns().map((r) => r.id));
    this.sql.exec("DELETE FROM lane_leases");
    for (const l of leases)
      if (!returning.has(l.id))
        this.sql.exec("INSERT INTO lane_leases (id, granted_at) VALUES (?, ?)", l.id, l.grantedAt);
  }

  /** Leases on their way back to the bank (sent by the object after its transaction, retried by its alarm). */
  returns(): { id: string; attempts: number }[] {
    return this.sql.exec<{ id: string; attempts: number }>("SELECT id, attempts FROM lane_returns").toArray();
  }

  returned(ids: readonly string[]): void {
    for (const id of ids) this.sql.exec("DELETE FROM lane_returns WHERE id = ?", id);
  }

  returnFailed(ids: readonly string[]): void {
    for (const id of ids) this.sql.exec("UPDATE lane_returns SET attempts = attempts + 1 WHERE id = ?", id);
  }

  /** Granted children not yet told (their session is called by the object; its own ask also counts as told). */
  untold(): string[] {
    return this.sql
      .exec<{ child_key: string }>(
        "SELECT child_key FROM lane_slots WHERE state = 'running' AND notified = 0 LIMIT 100",
      )
      .toArray()
      .map((r) => r.child_key);
  }

  told(childKey: string): void {
    this.sql.exec("UPDATE lane_slots SET notified = 1 WHERE child_key = ?", childKey);
  }

  /** How many more leases this agent needs from the bank: its waiters. */
  want(): number {
    return this.count("waiting");
  }

  /** Running children not checked for STALE_CHECK_MS, least recently checked first: a deleted child never releases. */
  staleRunning(limit: number): string[] {
    const before = Date.now() - STALE_CHECK_MS;
    const rows = this.sql
      .exec<{ child_key: string }>(
        "SELECT child_key FROM lane_slots WHERE state = 'running' AND updated_at < ? AND checked_at < ? ORDER BY checked_at, updated_at LIMIT ?",
        before,
        before,
        limit,
      )
      .toArray()
      .map((r) => r.child_key);
    for (const k of rows) this.sql.exec("UPDATE lane_slots SET checked_at = ? WHERE child_key = ?", Date.now(), k);
    return rows;
  }

  count(state: "running" | "waiting"): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM lane_slots WHERE state = ?", state).one().n;
  }

  setting(k: string): string | undefined {
    return this.sql.exec<{ v: string }>("SELECT v FROM lane_state WHERE k = ?", k).toArray()[0]?.v;
  }

  setSetting(k: string, v: string): void {
    this.sql.exec("INSERT INTO lane_state (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v", k, v);
  }

  /** A lease younger than LEASE_TERM_MS, while no other agent is known to wait for one. */
  private keeps(grantedAt: number): boolean {
    return grantedAt >= Date.now() - LEASE_TERM_MS && this.setting("contended") !== "1";
  }

  /** When the oldest idle lease must go back (the object's alarm gives it back then). */
  idleLeaseDue(): number | null {
    const t = this.sql
      .exec<{ t: number | null }>(
        "SELECT MIN(granted_at) AS t FROM lane_leases WHERE id NOT IN (SELECT lease FROM lane_slots WHERE lease IS NOT NULL)",
      )
      .one().t;
    return t === null ? null : t + LEASE_TERM_MS;
  }

  private giveBack(id: string): void {
    this.sql.exec("DELETE FROM lane_leases WHERE id = ?", id);
    this.sql.exec("INSERT INTO lane_returns (id) VALUES (?) ON CONFLICT (id) DO NOTHING", id);
  }

  private oldestWaiting(n: number): string[] {
    if (n <= 0) return [];
    return this.sql
      .exec<{ child_key: string }>("SELECT child_key FROM lane_slots WHERE state = 'waiting' ORDER BY seq LIMIT ?", n)
      .toArray()
      .map((r) => r.child_key);
  }
}

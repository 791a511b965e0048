/**
 * The slot bank (docs/subagent-lane.md): when the configuration sets `maxConcurrent`, exactly that many
 * leases exist for the whole gateway, and this object (`BANK_OBJECT` of the SUBAGENT_LANE namespace) holds
 * the count. It never sees a child: its rows are one per lease (at most `maxConcurrent`) and one per agent
 * whose lane wants leases (at most the configured agents), so no requester session, spawn or waiting child
 * can grow it. Agent lanes hand a lease on to their own next child locally while it is younger than
 * LEASE_TERM_MS (src/lane/subagent-lane.ts), so the bank's traffic is bounded by leases per term, not spawns.
 *
 * Fairness: a free lease goes to the wanting agent that holds the fewest, the longest-waiting first.
 */
import type { Lease } from "./subagent-lane";

export const BANK_OBJECT = "lane:bank";
/** Attempts to tell an agent's lane about a lease it was granted, 2 s doubling; after them its next call learns it. */
const BANK_PUSH_ATTEMPTS = 8;

export const BANK_TABLES = `
  CREATE TABLE bank_leases (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    told INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX bank_leases_agent ON bank_leases (agent);
  CREATE TABLE bank_agents (agent TEXT PRIMARY KEY, want INTEGER NOT NULL, since INTEGER NOT NULL);
  CREATE TABLE bank_clock (n INTEGER NOT NULL);
  INSERT INTO bank_clock (n) VALUES (0);
`;

/** What the bank tells a lane: all of its leases, and a version that orders answers and pushes. */
export interface BankView {
  version: number;
  leases: Lease[];
  /** Leases the bank still owes this agent (it asked for them; none was free). */
  want: number;
  /** Another agent waits for a lease: this agent's lane gives a finished child's lease back instead of reusing it. */
  contended: boolean;
}

export class SlotBank {
  constructor(private readonly sql: SqlStorage) {}

  /**
   * An agent's lane gives back `returning` and now wants `want` more leases; free leases go to the wanting
   * agents. In the caller's transaction. Returns the caller's view and the other agents granted leases
   * (the object pushes their new views to their lanes).
   */
  exchange(
    agent: string,
    returning: readonly string[],
    want: number,
    max: number,
  ): { view: BankView; others: string[] } {
    for (const id of returning) this.sql.exec("DELETE FROM bank_leases WHERE id = ? AND agent = ?", id, agent);
    const had = this.sql.exec<{ want: number }>("SELECT want FROM bank_agents WHERE agent = ?", agent).toArray()[0];
    if (had)
      this.sql.exec(
        // An agent that starts wanting again queues behind the agents already waiting.
        "UPDATE bank_agents SET want = ?, since = CASE WHEN want <= 0 THEN ? ELSE since END WHERE agent = ?",
        want,
        Date.now(),
        agent,
      );
    else this.sql.exec("INSERT INTO bank_agents (agent, want, since) VALUES (?, ?, ?)", agent, want, Date.now());
    const granted = this.grantFree(max);
    // The caller learns its own leases from this answer.
    this.sql.exec("UPDATE bank_leases SET told = 1 WHERE agent = ?", agent);
    const others = granted.filter((a) => a !== agent);
    const left = this.sql.exec<{ want: number }>("SELECT want FROM bank_agents WHERE agent = ?", agent).toArray()[0];
    if ((had?.want ?? 0) <= 0 && (left?.want ?? 0) > 0) {
      // This agent starts waiting with every lease out: the holders hear of it now, so their next finished
      // child's lease comes back here instead of going to their own next child (docs/subagent-lane.md).
      for (const r of this.sql
        .exec<{ agent: string }>("SELECT DISTINCT agent FROM bank_leases WHERE agent != ?", agent)
        .toArray())
        others.push(r.agent);
    }
    return { view: this.view(agent), others: [...new Set(others)] };
  }

  /** Hand free leases (max minus held) to wanting agents, fewest held first; a lowered max revokes nothing. */
  private grantFree(max: number): string[] {
    const granted: string[] = [];
    let free = max - this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM bank_leases").one().n;
    while (free > 0) {
      const next = this.sql
        .exec<{ agent: string }>(
          `SELECT a.agent FROM bank_agents a WHERE a.want > 0
           ORDER BY (SELECT COUNT(*) FROM bank_leases l WHERE l.agent = a.agent), a.since LIMIT 1`,
        )
        .toArray()[0];
      if (!next) break;
      const now = Date.now();
      this.sql.exec(
        "INSERT INTO bank_leases (id, agent, granted_at, told, next_at) VALUES (?, ?, ?, 0, ?)",
        crypto.randomUUID(),
        next.agent,
        now,
        now,
      );
      // Served: it goes behind the others that still want one (round robin among equals).
      this.sql.exec("UPDATE bank_agents SET want = want - 1, since = ? WHERE agent = ?", now, next.agent);
      granted.push(next.agent);
      free--;
    }
    // Agents that neither want nor hold anything leave the table (it stays bounded by the active agents).
    this.sql.exec("DELETE FROM bank_agents WHERE want <= 0 AND agent NOT IN (SELECT agent FROM bank_leases)");
    return granted;
  }

  view(agent: string): BankView {
    // One clock for the whole bank (an agent's row comes and goes): a lane keeps the newest view it saw.
    const version = this.sql.exec<{ n: number }>("UPDATE bank_clock SET n = n + 1 RETURNING n").one().n;
    const row = this.sql.exec<{ want: number }>("SELECT want FROM bank_agents WHERE agent = ?", agent).toArray()[0];
    const leases = this.sql
      .exec<{ id: string; granted_at: number }>(
        "SELECT id, granted_at FROM bank_leases WHERE agent = ? ORDER BY granted_at",
        agent,
      )
      .toArray()
      .map((r) => ({ id: r.id, grantedAt: r.granted_at }));
    const contended =
      this.sql.exec("SELECT 1 FROM bank_agents WHERE agent != ? AND want > 0 LIMIT 1", agent).toArray().length > 0;
    return { version, leases, want: Math.max(0, row?.want ?? 0), contended };
  }

  /** Agents with leases they have not been told of, whose next attempt is due. */
  untold(now: number): string[] {
    return this.sql
      .exec<{ agent: string }>(
        "SELECT DISTINCT agent FROM bank_leases WHERE told = 0 AND attempts < ? AND next_at <= ? LIMIT 50",
        BANK_PUSH_ATTEMPTS,
        now,
      )
      .toArray()
      .map((r) => r.agent);
  }

  /** The earliest due push attempt, for the alarm. */
  nextPushAt(): number | null {
    return (
      this.sql
        .exec<{ t: number | null }>(
          "SELECT MIN(next_at) AS t FROM bank_leases WHERE told = 0 AND attempts < ?",
          BANK_PUSH_ATTEMPTS,
        )
        .one().t ?? null
    );
  }

  /** The lane took the view (and said how many it still wants). */
  told(agent: string, want: number): void {
    this.sql.exec("UPDATE bank_leases SET told = 1 WHERE agent = ?", agent);
    this.sql.exec("UPDATE bank_agents SET want = ? WHERE agent = ?", want, agent);
  }

  pushFailed(agent: string): void {
    this.sql.exec(
      "UPDATE bank_leases SET attempts = attempts + 1, next_at = ? + (2000 << MIN(attempts, 8)) WHERE agent = ? AND told = 0",
      Date.now(),
      agent,
    );
  }

  /** Leases held, per agent (tests and docs/subagent-lane.md's fairness claims read it). */
  held(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.sql
      .exec<{ agent: string; n: number }>("SELECT agent, COUNT(*) AS n FROM bank_leases GROUP BY agent")
      .toArray())
      out[r.agent] = r.n;
    return out;
  }
}

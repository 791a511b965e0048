import { DurableObject } from "cloudflare:workers";
import { runMigrations } from "../migrations";
import { visToken } from "./hash";
import { type SearchScope, scopeExpression } from "./query-text";
import { snippetOf } from "./snippet";

/**
 * One shard of an agent's full-text search index (`search:<agentId>:<shard>`, docs/search.md): the
 * visible user and assistant text of the sessions whose key hashes here, in an FTS5 table
 * (`unicode61 remove_diacritics 2`). Session objects push their new messages (src/search/feed.ts);
 * a search asks each shard once. Visibility is part of the query: each message carries its session's
 * visibility tokens in an indexed column, and the stored keys are compared exactly.
 */

/**
 * Matches one shard ranks per search, newest first (docs/limits.md): FTS5 walks its posting lists in rowid
 * order and stops here, so a query matching millions of messages costs what one matching this many does.
 * A search that reached it says `truncated` and asks for a narrower query. 200: scoring is most of a
 * common query's cost, and at 200 a word in all of 100,000 sessions costs about 1.5× what it costs in 100
 * (docs/search.md, "Costs").
 */
export const SEARCH_CANDIDATES_PER_SHARD = 200;
/** Sessions per `ingestMany` call: one transaction stays short. */
export const INGEST_MANY_MAX = 5_000;
/** FTS rowid of docs row `id` is FTS_ROWID_TOP − id: newer messages get smaller rowids (search()). */
const FTS_ROWID_TOP = 2 ** 52;
/** Messages of a removed session deleted per transaction (a large session is purged over several alarms). */
const PURGE_BATCH = 2000;
/** A removed session's tombstone (it stops a late push from bringing its messages back) is kept this long. */
const TOMBSTONE_MS = 24 * 60 * 60_000;

const MIGRATIONS = [
  `
  -- A session generation: its key, sessionId and spawner. removed_at set = deleted or archived; its
  -- messages are purged in batches and the row stays as a tombstone until TOMBSTONE_MS has passed.
  CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    spawned_by TEXT,
    removed_at INTEGER,
    UNIQUE (key, session_id)
  );
  CREATE INDEX sessions_removed ON sessions (removed_at);
  -- One indexed message; its id is the FTS5 rowid, so newer messages have larger ids.
  CREATE TABLE docs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    ts INTEGER NOT NULL,
    UNIQUE (session, seq)
  );
  CREATE VIRTUAL TABLE fts USING fts5(body, vis, tokenize = 'unicode61 remove_diacritics 2');
  `,
];

export interface IngestBatch {
  key: string;
  sessionId: string;
  spawnedBy: string | null;
  docs: { seq: number; role: "user" | "assistant"; ts: number; text: string }[];
}

export interface ShardQuery {
  /** FTS5 expression over `body` (src/search/query-text.ts matchExpression). */
  match: string;
  /** The query's folded words, for the snippets (src/search/snippet.ts queryWords). */
  words: string[];
  scope: SearchScope;
  /** Only this session (canonical key). */
  onlyKey?: string;
  limit: number;
}

export interface ShardHit {
  key: string;
  sessionId: string;
  seq: number;
  role: "user" | "assistant";
  ts: number;
  score: number;
  snippet: string;
}

type Row = {
  id: number;
  seq: number;
  role: "user" | "assistant";
  ts: number;
  key: string;
  session_id: string;
  score: number;
};

export interface ShardHits {
  hits: ShardHit[];
  /** More visible matches than `limit` in this shard. */
  more: boolean;
  /** The candidate cap was reached: older matches were not ranked. */
  capped: boolean;
}

export class SearchIndexObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    ctx.blockConcurrencyWhile(async () => runMigrations(this.sql, MIGRATIONS));
  }

  /**
   * New messages of one session. Idempotent: a message already indexed (same session generation and
   * seq) is skipped, so a push retried after a lost answer indexes nothing twice. A push for a removed
   * generation is dropped (its tombstone), so a push racing the removal cannot bring it back.
   */
  async ingest(batch: IngestBatch): Promise<{ indexed: number }> {
    return this.ctx.storage.transactionSync(() => this.write(batch));
  }

  /** Many sessions' pushes in one transaction (bulk imports, the bench's seeding; at most INGEST_MANY_MAX). */
  async ingestMany(batches: IngestBatch[]): Promise<{ indexed: number }> {
    if (batches.length > INGEST_MANY_MAX) throw new Error(`ingestMany: at most ${INGEST_MANY_MAX} sessions per call`);
    return this.ctx.storage.transactionSync(() => ({
      indexed: batches.reduce((n, b) => n + this.write(b).indexed, 0),
    }));
  }

  private write(batch: IngestBatch): { indexed: number } {
    const row = this.sql
      .exec<{ id: number; removed_at: number | null }>(
        `INSERT INTO sessions (key, session_id, spawned_by) VALUES (?, ?, ?)
         ON CONFLICT (key, session_id) DO UPDATE SET spawned_by = sessions.spawned_by RETURNING id, removed_at`,
        batch.key,
        batch.sessionId,
        batch.spawnedBy,
      )
      .one();
    if (row.removed_at !== null) return { indexed: 0 };
    const vis = [visToken("k", batch.key), ...(batch.spawnedBy ? [visToken("p", batch.spawnedBy)] : [])].join(" ");
    let indexed = 0;
    for (const d of batch.docs) {
      const id = this.sql
        .exec<{ id: number }>(
          "INSERT INTO docs (session, seq, role, ts) VALUES (?, ?, ?, ?) ON CONFLICT (session, seq) DO NOTHING RETURNING id",
          row.id,
          d.seq,
          d.role,
          d.ts,
        )
        .toArray()[0]?.id;
      if (id === undefined) continue;
      this.sql.exec("INSERT INTO fts (rowid, body, vis) VALUES (?, ?, ?)", FTS_ROWID_TOP - id, d.text, vis);
      indexed++;
    }
    return { indexed };
  }

  /**
   * A session was deleted or archived: its every generation stops matching at once (the query skips
   * removed sessions), and its messages are purged — a batch now, the rest by the alarm.
   */
  async remove(key: string, sessionId: string): Promise<void> {
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      this.sql.exec("UPDATE sessions SET removed_at = ? WHERE key = ? AND removed_at IS NULL", now, key);
      // The generation being removed gets its tombstone even if it never pushed: a push still in flight
      // (or retried later) finds it and is dropped.
      this.sql.exec(
        "INSERT INTO sessions (key, session_id, removed_at) VALUES (?, ?, ?) ON CONFLICT (key, session_id) DO NOTHING",
        key,
        sessionId,
        now,
      );
    });
    if (this.purge()) await this.ctx.storage.setAlarm(Date.now());
    else await this.armTombstones();
  }

  /** Purge the next batch of removed sessions' messages; true while more are left. */
  private purge(): boolean {
    return this.ctx.storage.transactionSync(() => {
      const ids = this.sql
        .exec<{ id: number }>(
          `SELECT d.id FROM sessions s JOIN docs d ON d.session = s.id
           WHERE s.removed_at IS NOT NULL ORDER BY s.removed_at LIMIT ?`,
          PURGE_BATCH + 1,
        )
        .toArray()
        .map((r) => r.id);
      const batch = JSON.stringify(ids.slice(0, PURGE_BATCH));
      this.sql.exec("DELETE FROM fts WHERE rowid IN (SELECT ? - value FROM json_each(?))", FTS_ROWID_TOP, batch);
      this.sql.exec("DELETE FROM docs WHERE id IN (SELECT value FROM json_each(?))", batch);
      return ids.length > PURGE_BATCH;
    });
  }

  /** The alarm: the next purge batch, then tombstones past their time; re-armed while work is left. */
  async alarm(): Promise<void> {
    if (this.purge()) {
      await this.ctx.storage.setAlarm(Date.now());
      return;
    }
    this.sql.exec(
      "DELETE FROM sessions WHERE removed_at IS NOT NULL AND removed_at < ? AND id NOT IN (SELECT session FROM docs)",
      Date.now() - TOMBSTONE_MS,
    );
    await this.armTombstones();
  }

  private async armTombstones(): Promise<void> {
    const oldest = this.sql
      .exec<{ at: number | null }>("SELECT MIN(removed_at) AS at FROM sessions WHERE removed_at IS NOT NULL")
      .one().at;
    if (oldest === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(oldest + TOMBSTONE_MS);
  }

  /**
   * The best `limit` visible matches in this shard: score (−bm25) desc, then timestamp desc, key, seq.
   * The newest SEARCH_CANDIDATES_PER_SHARD matches of the full-text index (narrowed by the scope's
   * tokens) are ranked; their sessions are then checked exactly against the scope.
   */
  async search(q: ShardQuery): Promise<ShardHits> {
    const scope = scopeExpression(q.scope, q.onlyKey);
    const match = scope ? `(${q.match}) AND ${scope}` : q.match;
    // FTS rowids count down from FTS_ROWID_TOP: ascending rowid order is newest first, the order in which
    // FTS5 walks a posting list lazily and stops at LIMIT (descending would load whole posting lists).
    const candidates = this.sql
      .exec<{ rowid: number; score: number }>(
        "SELECT rowid, -bm25(fts, 1.0, 0.0) AS score FROM fts WHERE fts MATCH ? ORDER BY rowid LIMIT ?",
        match,
        SEARCH_CANDIDATES_PER_SHARD + 1,
      )
      .toArray();
    const capped = candidates.length > SEARCH_CANDIDATES_PER_SHARD;
    if (capped) candidates.pop();
    if (candidates.length === 0) return { hits: [], more: false, capped: false };
    // Best score first (stable: newest first among equals). Only the best ones are joined to their
    // sessions, a chunk at a time, each chunk ending after every candidate of its last score, so the
    // rows joined are exactly those that can still make the top `limit`.
    candidates.sort((x, y) => y.score - x.score);
    const [filter, args] = scopeFilter(q.scope, q.onlyKey);
    const rows: Row[] = [];
    let next = 0;
    while (next < candidates.length && rows.length <= q.limit) {
      let end = Math.min(candidates.length, next + 2 * (q.limit + 1));
      while (end < candidates.length && candidates[end].score === candidates[end - 1].score) end++;
      const chunk = candidates.slice(next, end);
      const score = new Map(chunk.map((c) => [FTS_ROWID_TOP - c.rowid, c.score]));
      for (const r of this.sql.exec<Omit<Row, "score">>(
        `SELECT d.id, d.seq, d.role, d.ts, s.key, s.session_id FROM docs d JOIN sessions s ON s.id = d.session
         WHERE d.id IN (SELECT value FROM json_each(?)) AND s.removed_at IS NULL${filter}`,
        JSON.stringify([...score.keys()]),
        ...args,
      ))
        rows.push({ ...r, score: score.get(r.id) ?? 0 });
      next = end;
    }
    rows.sort(compareHits);
    const top = rows.slice(0, q.limit);
    const bodies = this.bodiesOf(top.map((r) => r.id));
    const hits = top.map((r) => ({
      key: r.key,
      sessionId: r.session_id,
      seq: r.seq,
      role: r.role,
      ts: r.ts,
      score: r.score,
      snippet: snippetOf(bodies.get(r.id) ?? "", q.words),
    }));
    return { hits, more: rows.length > q.limit || next < candidates.length, capped };
  }

  /**
   * The stored texts of the few rows kept, by rowid and without MATCH: beside MATCH, workerd's FTS5
   * ignores an equality on rowid and walks every match (test/search/search-index.test.ts checks each
   * snippet is its own row's).
   */
  private bodiesOf(ids: number[]): Map<number, string> {
    const wanted = new Map(ids.map((id) => [FTS_ROWID_TOP - id, id]));
    const out = new Map<number, string>();
    for (const r of this.sql.exec<{ rowid: number; body: string }>(
      "SELECT rowid, body FROM fts WHERE rowid IN (SELECT value FROM json_each(?))",
      JSON.stringify([...wanted.keys()]),
    )) {
      const id = wanted.get(r.rowid);
      if (id !== undefined) out.set(id, r.body);
    }
    return out;
  }

  /** What the shard holds (tests and the bench): live sessions, all messages, tombstones. */
  async counts(): Promise<{ sessions: number; docs: number; removed: number }> {
    return this.sql
      .exec<{ sessions: number; docs: number; removed: number }>(
        `SELECT (SELECT COUNT(*) FROM sessions WHERE removed_at IS NULL) AS sessions, (SELECT COUNT(*) FROM docs) AS docs,
           (SELECT COUNT(*) FROM sessions WHERE removed_at IS NOT NULL) AS removed`,
      )
      .one();
  }
}

/** The exact check of the scope on the candidates' sessions (the tokens only narrowed them). */
function scopeFilter(scope: SearchScope, onlyKey?: string): [string, string[]] {
  let sql = "";
  const args: string[] = [];
  if (scope.type === "self") {
    sql += " AND s.key = ?";
    args.push(scope.key);
  } else if (scope.type === "tree") {
    sql += " AND (s.key = ? OR s.spawned_by = ?)";
    args.push(scope.key, scope.key);
  }
  if (onlyKey !== undefined) {
    sql += " AND s.key = ?";
    args.push(onlyKey);
  }
  return [sql, args];
}

/** The result order (docs/search.md): score desc, then newest, then key, then message. */
export function compareHits(
  a: { score: number; ts: number; key: string; seq: number },
  b: { score: number; ts: number; key: string; seq: number },
): number {
  return b.score - a.score || b.ts - a.ts || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) || a.seq - b.seq;
}

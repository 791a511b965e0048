import { DurableObject } from "cloudflare:workers";
import { runMigrations } from "../migrations";
import { LAYOUT_SCHEMA } from "./index-layout";
import { MOVE_SCHEMA, moveBatch } from "./legacy-move";
import type { IndexEntry, SessionRow } from "./row";
import { WritePacer } from "./write-pacing";

/**
 * One shard of an agent's session index (`registry:<agentId>:<shard>`, placed by src/registry/session-index.ts).
 * It holds the rows whose key hashes to it and the sessionId locators whose sessionId hashes to it.
 * Every list and resolve is one indexed query with visibility in the WHERE clause and LIMIT applied
 * last, so a scoped caller never gets an under-filled page. The same class serves the pre-sharding
 * object `registry:<agentId>` while it moves its rows out (src/registry/legacy-move.ts).
 */
export type ListScope = { type: "self"; key: string } | { type: "tree"; key: string } | { type: "agent" };

export interface ListQuery {
  scope: ListScope;
  kinds?: string[];
  /** Only rows with updatedAt >= this (ms). */
  activeSince?: number;
  limit: number;
  /** Keyset cursor: rows strictly older than this (updatedAt desc, key desc). */
  cursor?: { updatedAt: number; key: string };
  /** Only rows with exactly this label. */
  label?: string;
  /** Lower-case text the key, label, sessionId, kind, display name, channel or model must contain. */
  search?: string;
}

/**
 * Rows one shard looks at for a `search` page: matching is a scan (no index answers "contains"), so a page
 * reads at most this many rows, newest first, and ends with a cursor where the scan stopped
 * (docs/limits.md). The next page goes on from there.
 */
export const SEARCH_SCAN_ROWS = 2000;

/** The fields `search` looks in, lower-cased: the row's columns and the display fields of its JSON. */
const SEARCH_HAYSTACK = `lower(key || ' ' || COALESCE(label, '') || ' ' || session_id || ' ' || kind || ' ' ||
  COALESCE(json_extract(row_json, '$.displayName'), '') || ' ' || COALESCE(json_extract(row_json, '$.channel'), '') || ' ' ||
  COALESCE(json_extract(row_json, '$.model'), ''))`;

export interface ListPage {
  rows: SessionRow[];
  /** Cursor of the last row when more rows may follow. */
  next: { updatedAt: number; key: string } | null;
}

/**
 * One shard's answer to a listing, in listing order: each row's position (key, updatedAt) and its stored
 * JSON text, unparsed. The merge (src/registry/session-index.ts) picks a page by position and parses only
 * the rows it keeps; strings cross the RPC boundary far cheaper than object graphs (docs/scale.md).
 */
export interface ShardPage {
  keys: string[];
  updatedAt: number[];
  rows: string[];
  /** Cursor of the last row when more rows may follow. */
  next: { updatedAt: number; key: string } | null;
}

const MIGRATIONS = [
  `
  CREATE TABLE sessions (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    label TEXT,
    spawned_by TEXT,
    updated_at INTEGER NOT NULL,
    listed INTEGER NOT NULL,
    row_json TEXT NOT NULL
  );
  CREATE INDEX sessions_recent ON sessions (listed, updated_at DESC, key DESC);
  CREATE INDEX sessions_kind ON sessions (listed, kind, updated_at DESC, key DESC);
  CREATE INDEX sessions_children ON sessions (spawned_by, updated_at DESC, key DESC);
  CREATE INDEX sessions_session_id ON sessions (session_id);
  CREATE INDEX sessions_label ON sessions (label);
  `,
  // sessionId → key, so resolving a sessionId is one lookup in one shard whatever the shard count.
  `
  CREATE TABLE session_ids (
    session_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    spawned_by TEXT
  );
  `,
  MOVE_SCHEMA,
  LAYOUT_SCHEMA,
];

/**
 * A shard's page from its rows in listing order (one more than `limit` tells that more follow). `scanStop`:
 * where a search scan stopped short of the listing's end — the page's cursor when the page is not full.
 */
function shardPageOf(
  rows: { key: string; updated_at: number; row_json: string }[],
  limit: number,
  scanStop: { updatedAt: number; key: string } | null,
): ShardPage {
  const more = rows.length > limit;
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    keys: page.map((r) => r.key),
    updatedAt: page.map((r) => r.updated_at),
    rows: page.map((r) => r.row_json),
    next: more && last ? { updatedAt: last.updated_at, key: last.key } : scanStop,
  };
}

/** A lookup limited to one parent's children (a sandboxed or tree-scoped caller): the condition and its argument. */
function childOf(spawnedBy: string | undefined): [string, string[]] {
  return spawnedBy ? [" AND spawned_by = ?", [spawnedBy]] : ["", []];
}

export class RegistryObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly pacer = new WritePacer();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    ctx.blockConcurrencyWhile(async () => runMigrations(this.sql, MIGRATIONS));
  }

  /**
   * Upsert a session's row. Writes can arrive out of order (an inline write racing a coalesced one),
   * so an older row never overwrites a newer one. `withLocator`: the sessionId's locator lives in this
   * shard too (src/registry/session-id.ts) and is written in the same transaction, so the row is never
   * listed without being resolvable.
   */
  async upsert(e: IndexEntry, opts: { withLocator?: boolean } = {}): Promise<{ nextWriteInMs: number }> {
    this.ctx.storage.transactionSync(() => {
      if (opts.withLocator) this.writeLocator(e.sessionId, e.key, e.spawnedBy);
      this.writeRow(e);
    });
    return { nextWriteInMs: this.pacer.record(Date.now()) };
  }

  private writeRow(e: IndexEntry): void {
    this.sql.exec(
      `INSERT INTO sessions (key, session_id, kind, label, spawned_by, updated_at, listed, row_json)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (key) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind, label = excluded.label,
         spawned_by = excluded.spawned_by, updated_at = excluded.updated_at, listed = excluded.listed, row_json = excluded.row_json
       WHERE excluded.updated_at >= sessions.updated_at`,
      e.key,
      e.sessionId,
      e.kind,
      e.label,
      e.spawnedBy,
      e.updatedAt,
      e.listed ? 1 : 0,
      JSON.stringify(e.row),
    );
  }

  /** Many rows in one call (seeding, bulk imports). */
  async upsertMany(entries: IndexEntry[]): Promise<void> {
    this.ctx.storage.transactionSync(() => {
      for (const e of entries) this.writeRow(e);
    });
  }

  /** A deleted session. While rows move out of this object, the deletion is remembered so a copy in flight is removed too. */
  async remove(key: string): Promise<void> {
    const had = this.sql
      .exec<{ session_id: string }>("SELECT session_id FROM sessions WHERE key = ?", key)
      .toArray()[0];
    this.sql.exec("DELETE FROM sessions WHERE key = ?", key);
    if (had && this.sql.exec("SELECT 1 FROM move_state").toArray().length > 0) {
      this.sql.exec(
        "INSERT INTO move_removed (key, session_id, removed_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET session_id = excluded.session_id, removed_at = excluded.removed_at",
        key,
        had.session_id,
        Date.now(),
      );
    }
  }

  /** Remove a moved copy of a deleted session, unless the session was recreated since (a newer row). */
  async removeIfNotNewer(key: string, removedAt: number): Promise<void> {
    this.sql.exec("DELETE FROM sessions WHERE key = ? AND updated_at <= ?", key, removedAt);
  }

  /** Drop a stale pre-sharding row (its session now writes to its shard); says whether any row is left here. */
  async forget(key: string): Promise<{ drained: boolean }> {
    this.sql.exec("DELETE FROM sessions WHERE key = ?", key);
    return { drained: !this.hasAnyRow() };
  }

  /** Record where a sessionId's session lives (write-once: a session's sessionId never changes). */
  async indexSessionId(sessionId: string, key: string, spawnedBy: string | null): Promise<void> {
    this.writeLocator(sessionId, key, spawnedBy);
  }

  private writeLocator(sessionId: string, key: string, spawnedBy: string | null): void {
    this.sql.exec(
      "INSERT INTO session_ids (session_id, key, spawned_by) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET key = excluded.key, spawned_by = excluded.spawned_by",
      sessionId,
      key,
      spawnedBy,
    );
  }

  async indexSessionIds(ids: { sessionId: string; key: string; spawnedBy: string | null }[]): Promise<void> {
    this.ctx.storage.transactionSync(() => {
      for (const i of ids) this.writeLocator(i.sessionId, i.key, i.spawnedBy);
    });
  }

  async forgetSessionId(sessionId: string): Promise<void> {
    this.sql.exec("DELETE FROM session_ids WHERE session_id = ?", sessionId);
  }

  /** The key of a sessionId from the locator table (at most one: sessionIds are random UUIDs). */
  async lookupSessionId(id: string, spawnedBy?: string): Promise<string[]> {
    const [parent, parentArgs] = childOf(spawnedBy);
    return this.sql
      .exec<{ key: string }>(`SELECT key FROM session_ids WHERE session_id = ?${parent}`, id, ...parentArgs)
      .toArray()
      .map((r) => r.key);
  }

  /** Shard 0 only: the index's shard count, recording `shards` when none is recorded yet (src/registry/index-layout.ts). */
  async claimLayout(shards: number): Promise<number> {
    const row = this.sql.exec<{ shards: number }>("SELECT shards FROM index_layout").toArray()[0];
    if (row) return row.shards;
    this.sql.exec("INSERT INTO index_layout (shards) VALUES (?)", shards);
    return shards;
  }

  /** Shard 0 only: change the recorded count from `from` to `to` (compare-and-set); false if it was not `from`. */
  async replaceLayout(from: number, to: number): Promise<boolean> {
    return this.sql.exec("UPDATE index_layout SET shards = ? WHERE shards = ?", to, from).rowsWritten > 0;
  }

  /**
   * Pre-sharding object only: start moving its rows to `shards` shards (alarm-driven, batch by batch).
   * Returns whether rows are still here, so readers keep including this object until it is empty.
   */
  async moveOut(agentId: string, shards: number): Promise<{ pending: boolean }> {
    if (!this.hasAnyRow()) return { pending: false };
    if (this.sql.exec("SELECT 1 FROM move_state").toArray().length === 0) {
      this.sql.exec("INSERT INTO move_state (agent_id, shards, attempts) VALUES (?, ?, 0)", agentId, shards);
      await this.ctx.storage.setAlarm(Date.now());
    }
    return { pending: true };
  }

  async alarm(): Promise<void> {
    await moveBatch(this.ctx, this.env);
  }

  private hasAnyRow(): boolean {
    return this.sql.exec("SELECT 1 FROM sessions LIMIT 1").toArray().length > 0;
  }

  async get(key: string): Promise<{ key: string; spawnedBy: string | null; row: SessionRow } | null> {
    const r = this.sql
      .exec<{ key: string; spawned_by: string | null; row_json: string }>(
        "SELECT key, spawned_by, row_json FROM sessions WHERE key = ?",
        key,
      )
      .toArray()[0];
    return r ? { key: r.key, spawnedBy: r.spawned_by, row: JSON.parse(r.row_json) } : null;
  }

  async list(q: ListQuery): Promise<ShardPage> {
    const where: string[] = ["listed = 1"];
    const args: (string | number)[] = [];
    if (q.scope.type === "self") {
      where.push("key = ?");
      args.push(q.scope.key);
    }
    if (q.kinds && q.kinds.length > 0) {
      where.push(`kind IN (${q.kinds.map(() => "?").join(", ")})`);
      args.push(...q.kinds);
    }
    if (q.activeSince !== undefined) {
      where.push("updated_at >= ?");
      args.push(q.activeSince);
    }
    if (q.label !== undefined) {
      where.push("label = ?");
      args.push(q.label);
    }
    if (q.cursor) {
      // `updated_at <= ?` is the index's range bound; the OR alone is no bound, and SQLite then read every
      // row newer than the cursor to reach the page: O(position) per page (test/tools/sessions-list.test.ts).
      where.push("updated_at <= ? AND (updated_at < ? OR key < ?)");
      args.push(q.cursor.updatedAt, q.cursor.updatedAt, q.cursor.key);
    }
    const limit = Math.max(1, Math.min(q.limit, 1000));
    const select = (w: string[], index = "") =>
      `SELECT key, updated_at, row_json, ${q.search !== undefined ? `${SEARCH_HAYSTACK} AS haystack` : "NULL AS haystack"} FROM sessions ${index}WHERE ${w.join(" AND ")}`;
    // Tree scope = the caller's own row (primary key) + its children (sessions_children), merged in
    // index order. One `key = ? OR spawned_by = ?` made SQLite walk sessions_recent over every row of
    // the agent: O(sessions) per call, 6× slower at 100,000 sessions (npm run bench). The children's arm
    // names its index: left to choose, SQLite walked sessions_recent (listed = 1, in the ORDER BY's order)
    // and filtered spawned_by, O(rows in the shard) again (test/tools/sessions-list.test.ts, "a tree page reads…").
    const [query, queryArgs] =
      q.scope.type === "tree"
        ? [
            `${select(["key = ?", ...where])} UNION ALL ${select(["spawned_by = ?", "key <> ?", ...where], "INDEXED BY sessions_children ")}`,
            [q.scope.key, ...args, q.scope.key, q.scope.key, ...args],
          ]
        : [select(where), args];
    if (q.search !== undefined) return this.searchPage(query, queryArgs, q.search, limit);
    const rows = this.sql
      .exec<{ key: string; updated_at: number; row_json: string }>(
        `${query} ORDER BY updated_at DESC, key DESC LIMIT ?`,
        ...queryArgs,
        limit + 1,
      )
      .toArray();
    return shardPageOf(rows, limit, null);
  }

  /**
   * A `search` page: the matching rows among the newest SEARCH_SCAN_ROWS of the listing (after the cursor).
   * When the scan stopped before the listing's end, the page ends where it stopped, so the next page
   * scans on from there (src/registry/session-index.ts never merges past it).
   */
  private searchPage(query: string, queryArgs: (string | number)[], search: string, limit: number): ShardPage {
    const stop = this.sql
      .exec<{ key: string; updated_at: number }>(
        `SELECT key, updated_at FROM (${query}) ORDER BY updated_at DESC, key DESC LIMIT 1 OFFSET ?`,
        ...queryArgs,
        SEARCH_SCAN_ROWS - 1,
      )
      .toArray()[0];
    const within = stop ? " AND (updated_at > ? OR (updated_at = ? AND key >= ?))" : "";
    const rows = this.sql
      .exec<{ key: string; updated_at: number; row_json: string }>(
        `SELECT key, updated_at, row_json FROM (${query}) WHERE instr(haystack, ?) > 0${within} ORDER BY updated_at DESC, key DESC LIMIT ?`,
        ...queryArgs,
        search,
        ...(stop ? [stop.updated_at, stop.updated_at, stop.key] : []),
        limit + 1,
      )
      .toArray();
    return shardPageOf(rows, limit, stop ? { updatedAt: stop.updated_at, key: stop.key } : null);
  }

  /** Keys whose sessionId is `id` (at most 2: enough to tell "none", "one" and "ambiguous"). */
  async resolveSessionId(id: string, spawnedBy?: string): Promise<string[]> {
    const [parent, parentArgs] = childOf(spawnedBy);
    return this.sql
      .exec<{ key: string }>(`SELECT key FROM sessions WHERE session_id = ?${parent} LIMIT 2`, id, ...parentArgs)
      .toArray()
      .map((r) => r.key);
  }

  /** Newest rows (at most 5) with this label, for a merge over shards. */
  async resolveLabelRows(label: string, spawnedBy?: string): Promise<{ key: string; updatedAt: number }[]> {
    const [parent, parentArgs] = childOf(spawnedBy);
    return this.sql
      .exec<{ key: string; updated_at: number }>(
        `SELECT key, updated_at FROM sessions WHERE label = ?${parent} ORDER BY updated_at DESC LIMIT 5`,
        label,
        ...parentArgs,
      )
      .toArray()
      .map((r) => ({ key: r.key, updatedAt: r.updated_at }));
  }

  /** Bytes this object's SQLite database takes (bench/index.mjs measures bytes per row with it, docs/scale.md). */
  async storedBytes(): Promise<number> {
    return this.sql.databaseSize;
  }

  async count(): Promise<number> {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sessions").one().n;
  }
}

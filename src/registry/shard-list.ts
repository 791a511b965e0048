import type { SessionRow } from "./row";

/**
 * One shard's listing: the indexed query behind RegistryObject.list (src/registry/registry-object.ts), with
 * visibility in the WHERE clause and LIMIT applied last, so a scoped caller never gets an under-filled page.
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
export function childOf(spawnedBy: string | undefined): [string, string[]] {
  return spawnedBy ? [" AND spawned_by = ?", [spawnedBy]] : ["", []];
}

export function listShard(sql: SqlStorage, q: ListQuery): ShardPage {
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
    `SELECT key, updated_at, row_json${q.search !== undefined ? `, ${SEARCH_HAYSTACK} AS haystack` : ""} FROM sessions ${index}WHERE ${w.join(" AND ")}`;
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
  if (q.search !== undefined) return searchPage(sql, query, queryArgs, q.search, limit);
  // Columns by position (`raw`), straight into the page's arrays: no object per row on the hot path of every
  // listing (docs/scale.md, "The self-sizing index").
  const page: ShardPage = { keys: [], updatedAt: [], rows: [], next: null };
  const cursor = sql.exec(`${query} ORDER BY updated_at DESC, key DESC LIMIT ?`, ...queryArgs, limit + 1).raw();
  for (const [key, updatedAt, row] of cursor) {
    // Row `limit + 1` (the last the query returns) only says that more follow, from the page's last row.
    if (page.keys.length === limit) page.next = { updatedAt: page.updatedAt[limit - 1], key: page.keys[limit - 1] };
    else {
      page.keys.push(key as string);
      page.updatedAt.push(updatedAt as number);
      page.rows.push(row as string);
    }
  }
  return page;
}

/**
 * A `search` page: the matching rows among the newest SEARCH_SCAN_ROWS of the listing (after the cursor).
 * When the scan stopped before the listing's end, the page ends where it stopped, so the next page
 * scans on from there (src/registry/session-index.ts never merges past it).
 */
function searchPage(
  sql: SqlStorage,
  query: string,
  queryArgs: (string | number)[],
  search: string,
  limit: number,
): ShardPage {
  const stop = sql
    .exec<{ key: string; updated_at: number }>(
      `SELECT key, updated_at FROM (${query}) ORDER BY updated_at DESC, key DESC LIMIT 1 OFFSET ?`,
      ...queryArgs,
      SEARCH_SCAN_ROWS - 1,
    )
    .toArray()[0];
  const within = stop ? " AND (updated_at > ? OR (updated_at = ? AND key >= ?))" : "";
  const rows = sql
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

import { type Backoff, backoffDelayMs } from "../backoff";
import { log } from "../log";
import { entryOf, MOVE_BATCH_ROWS, MOVE_MAX_ATTEMPTS, type StoredRow } from "./legacy-move";
import { indexShardStub } from "./registry-stubs";
import { shardOf } from "./shard-hash";

/**
 * One source shard's part of a layout change (docs/scale.md, "The self-sizing index"): the rows and sessionId
 * locators that belong elsewhere under the new count move there, batch by batch (SPLIT_SCAN_ROWS scanned),
 * from this shard's alarm.
 * Before the first batch the shard is sealed: calls made with an older layout are refused
 * (STALE_LAYOUT), so no writer with the old layout can put a row where readers of the new one do not look;
 * readers of the new layout read this shard before its targets (src/registry/session-index.ts), and a batch
 * is copied before it is deleted here, so a row is always in one of the two places read. Every step is a
 * row: an evicted shard resumes from its cursors, and a batch copied but not deleted is copied again
 * (the copy never overwrites a newer row).
 */
export const SPLIT_SCHEMA = `
  CREATE TABLE index_seal (epoch INTEGER NOT NULL);
  CREATE TABLE split_state (agent_id TEXT NOT NULL, shard INTEGER NOT NULL, epoch INTEGER NOT NULL,
    to_shards INTEGER NOT NULL, row_cursor TEXT NOT NULL DEFAULT '', id_cursor TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0, stalled INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE split_forgotten (session_id TEXT PRIMARY KEY);
`;

/**
 * Rows (and locators) one batch scans, in key order: a split moves about half of them, a merge all, so a
 * batch ships 0.5–1 MB of rows in one RPC per target (far under the 32 MiB RPC limit) and its deletes are one
 * short transaction. Scanning only 200 (the legacy move's batch) made a 100,000-row split 500 alarm runs.
 */
const SPLIT_SCAN_ROWS = 1_000;

/** The text of a refusal to a caller whose layout is older than the shard's seal (the caller re-reads it). */
export const STALE_LAYOUT = "index layout moved";

/** 2 s, 4 s … like the legacy move; after MOVE_MAX_ATTEMPTS failed batches the move stalls (below). */
const SPLIT_BACKOFF: Backoff = { baseDelayMs: 2_000, maxDelayMs: 2_000 * 2 ** MOVE_MAX_ATTEMPTS, jitter: "none" };

type SplitState = {
  agent_id: string;
  shard: number;
  epoch: number;
  to_shards: number;
  row_cursor: string;
  id_cursor: string;
  attempts: number;
  stalled: number;
};

export function sealOf(sql: SqlStorage): number {
  return sql.exec<{ epoch: number }>("SELECT epoch FROM index_seal").toArray()[0]?.epoch ?? 0;
}

export function splitting(sql: SqlStorage): boolean {
  return sql.exec("SELECT 1 FROM split_state").toArray().length > 0;
}

/**
 * Seal this shard at `epoch` and start moving out what does not belong here under `toShards`. Idempotent
 * (the coordinator may ask twice after an eviction); a stalled move of the same epoch restarts.
 */
export function beginSplit(
  sql: SqlStorage,
  a: { agentId: string; shard: number; epoch: number; toShards: number },
): boolean {
  if (sealOf(sql) > a.epoch) return false;
  sql.exec("DELETE FROM index_seal");
  sql.exec("INSERT INTO index_seal (epoch) VALUES (?)", a.epoch);
  const state = sql.exec<SplitState>("SELECT * FROM split_state").toArray()[0];
  if (state?.epoch === a.epoch) {
    sql.exec("UPDATE split_state SET stalled = 0, attempts = 0");
    return true;
  }
  sql.exec("DELETE FROM split_state");
  sql.exec(
    "INSERT INTO split_state (agent_id, shard, epoch, to_shards) VALUES (?, ?, ?, ?)",
    a.agentId,
    a.shard,
    a.epoch,
    a.toShards,
  );
  return true;
}

/** Objects with a batch in flight: a second alarm run meanwhile (a test's forced alarm) must not copy twice. */
const moving = new WeakSet<DurableObjectState>();

/**
 * One batch of this shard's move, from its alarm. Returns when the alarm should run again (null: nothing
 * left to do here). `done` tells the layout's coordinator (shard 0) that this source is empty of others' rows.
 */
export async function splitBatch(
  ctx: DurableObjectState,
  env: Pick<Env, "REGISTRY">,
  done: (agentId: string, epoch: number, shard: number) => Promise<void>,
): Promise<number | null> {
  if (moving.has(ctx)) return null;
  moving.add(ctx);
  try {
    return await oneBatch(ctx, env, done);
  } finally {
    moving.delete(ctx);
  }
}

async function oneBatch(
  ctx: DurableObjectState,
  env: Pick<Env, "REGISTRY">,
  done: (agentId: string, epoch: number, shard: number) => Promise<void>,
): Promise<number | null> {
  const sql = ctx.storage.sql;
  const s = sql.exec<SplitState>("SELECT * FROM split_state").toArray()[0];
  if (!s || s.stalled) return null;
  const away = (value: string) => shardOf(value, s.to_shards) !== s.shard;
  const scanned = sql
    .exec<StoredRow>(
      "SELECT key, session_id, kind, label, spawned_by, updated_at, listed, row_json FROM sessions WHERE key > ? ORDER BY key LIMIT ?",
      s.row_cursor,
      SPLIT_SCAN_ROWS,
    )
    .toArray();
  const ids = sql
    .exec<{ session_id: string; key: string; spawned_by: string | null }>(
      "SELECT session_id, key, spawned_by FROM session_ids WHERE session_id > ? ORDER BY session_id LIMIT ?",
      s.id_cursor,
      SPLIT_SCAN_ROWS,
    )
    .toArray();
  // Sessions deleted while a batch was in flight (src/registry/registry-object.ts `remove`): their copy
  // must not outlive them. Locators are write-once, so a forgotten one is removed outright.
  const removed = sql
    .exec<{ key: string; removed_at: number }>("SELECT key, removed_at FROM move_removed LIMIT ?", MOVE_BATCH_ROWS)
    .toArray();
  const forgotten = sql
    .exec<{ session_id: string }>("SELECT session_id FROM split_forgotten LIMIT ?", MOVE_BATCH_ROWS)
    .toArray();
  const rows = scanned.filter((r) => away(r.key));
  const locators = ids.filter((i) => away(i.session_id));
  try {
    if (scanned.length === 0 && ids.length === 0 && removed.length === 0 && forgotten.length === 0) {
      await done(s.agent_id, s.epoch, s.shard);
      sql.exec("DELETE FROM split_state");
      return null;
    }
    const to = (value: string) => indexShardStub(env, s.agent_id, shardOf(value, s.to_shards));
    const byShard = <T>(items: T[], value: (t: T) => string) => {
      const out = new Map<number, T[]>();
      for (const t of items) {
        const n = shardOf(value(t), s.to_shards);
        out.set(n, [...(out.get(n) ?? []), t]);
      }
      return [...out.entries()];
    };
    await Promise.all([
      ...byShard(rows, (r) => r.key).map(([n, b]) => indexShardStub(env, s.agent_id, n).upsertMany(b.map(entryOf))),
      ...byShard(locators, (i) => i.session_id).map(([n, b]) =>
        indexShardStub(env, s.agent_id, n).indexSessionIds(
          b.map((i) => ({ sessionId: i.session_id, key: i.key, spawnedBy: i.spawned_by })),
        ),
      ),
    ]);
    for (const r of removed) if (away(r.key)) await to(r.key).removeIfNotNewer(r.key, r.removed_at);
    for (const f of forgotten) if (away(f.session_id)) await to(f.session_id).forgetSessionId(f.session_id);
  } catch (err) {
    const attempts = s.attempts + 1;
    if (attempts >= MOVE_MAX_ATTEMPTS) {
      // The visible end: the layout stays "moving", so readers keep reading this shard and its targets
      // (nothing is lost, pages cost two rounds); the coordinator restarts stalled moves on its next check.
      sql.exec("UPDATE split_state SET stalled = 1, attempts = ?", attempts);
      log.error("registry_split_stalled", { attempts, error: err, shard: s.shard, epoch: s.epoch });
      return null;
    }
    sql.exec("UPDATE split_state SET attempts = ?", attempts);
    return Date.now() + backoffDelayMs(SPLIT_BACKOFF, attempts);
  }
  ctx.storage.transactionSync(() => {
    // Only the copied version goes: a row rewritten here meanwhile (impossible once sealed, but cheap to
    // respect) stays and is copied by a later pass.
    for (const r of rows) sql.exec("DELETE FROM sessions WHERE key = ? AND updated_at = ?", r.key, r.updated_at);
    for (const i of locators) sql.exec("DELETE FROM session_ids WHERE session_id = ? AND key = ?", i.session_id, i.key);
    for (const r of removed) sql.exec("DELETE FROM move_removed WHERE key = ? AND removed_at = ?", r.key, r.removed_at);
    for (const f of forgotten) sql.exec("DELETE FROM split_forgotten WHERE session_id = ?", f.session_id);
    const rowCursor = scanned.length > 0 ? scanned[scanned.length - 1].key : s.row_cursor;
    const idCursor = ids.length > 0 ? ids[ids.length - 1].session_id : s.id_cursor;
    sql.exec("UPDATE split_state SET row_cursor = ?, id_cursor = ?, attempts = 0", rowCursor, idCursor);
  });
  return Date.now();
}

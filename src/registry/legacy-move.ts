import { type Backoff, backoffDelayMs } from "../backoff";
import { log } from "../log";
import { indexShardStub, indexShardStubOf } from "./registry-stubs";
import type { IndexEntry, SessionRow } from "./row";
import { shardOf } from "./shard-hash";

/**
 * Moving the pre-sharding index (`registry:<agentId>`, one object per agent) into its shards. The old
 * object drives the move from its alarm, one batch at a time; readers keep reading it until it is empty
 * (src/registry/session-index.ts), so old rows stay listed and resolvable throughout.
 */
export const MOVE_SCHEMA = `
  CREATE TABLE move_state (agent_id TEXT NOT NULL, shards INTEGER NOT NULL, attempts INTEGER NOT NULL);
  CREATE TABLE move_removed (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, removed_at INTEGER NOT NULL);
`;

/** Rows per batch: ~1 KB each, so one batch is ~200 KB of RPC (far under the 32 MiB RPC limit, docs/scale.md). */
export const MOVE_BATCH_ROWS = 200;
/** A failing batch is retried with backoff this many times; then the move stops (rows stay here, still read) and says so in the log. */
export const MOVE_MAX_ATTEMPTS = 8;
/** 2 s, 4 s … 256 s: the cap is never reached before MOVE_MAX_ATTEMPTS ends the move. */
const MOVE_BACKOFF: Backoff = { baseDelayMs: 2_000, maxDelayMs: 2_000 * 2 ** MOVE_MAX_ATTEMPTS, jitter: "none" };

export type StoredRow = {
  key: string;
  session_id: string;
  kind: string;
  label: string | null;
  spawned_by: string | null;
  updated_at: number;
  listed: number;
  row_json: string;
};

export function entryOf(r: StoredRow): IndexEntry {
  const row = JSON.parse(r.row_json) as SessionRow;
  return {
    key: r.key,
    agentId: row.agentId,
    sessionId: r.session_id,
    kind: r.kind as IndexEntry["kind"],
    label: r.label,
    spawnedBy: r.spawned_by,
    updatedAt: r.updated_at,
    listed: r.listed === 1,
    row,
  };
}

/** Objects with a batch in flight: a second alarm run meanwhile (a test's forced alarm) must not copy rows twice. */
const moving = new WeakSet<DurableObjectState>();

/** Called from the old object's alarm: copy one batch to the shards, then delete it here. */
export async function moveBatch(ctx: DurableObjectState, env: Env): Promise<void> {
  if (moving.has(ctx)) return;
  moving.add(ctx);
  try {
    await moveOneBatch(ctx, env);
  } finally {
    moving.delete(ctx);
  }
}

async function moveOneBatch(ctx: DurableObjectState, env: Env): Promise<void> {
  const sql = ctx.storage.sql;
  const state = sql
    .exec<{ agent_id: string; shards: number; attempts: number }>("SELECT agent_id, shards, attempts FROM move_state")
    .toArray()[0];
  if (!state) return;
  const rows = sql
    .exec<StoredRow>(
      "SELECT key, session_id, kind, label, spawned_by, updated_at, listed, row_json FROM sessions ORDER BY key LIMIT ?",
      MOVE_BATCH_ROWS,
    )
    .toArray();
  const removed = sql
    .exec<{ key: string; session_id: string; removed_at: number }>(
      "SELECT key, session_id, removed_at FROM move_removed LIMIT ?",
      MOVE_BATCH_ROWS,
    )
    .toArray();
  if (rows.length === 0 && removed.length === 0) {
    sql.exec("DELETE FROM move_state");
    return;
  }
  try {
    await copyToShards(env, state.shards, rows.map(entryOf));
    // Sessions deleted while an earlier batch was in flight: their copy must not outlive them. A row
    // newer than the deletion is a recreated session and stays.
    for (const r of removed) {
      const agentId = state.agent_id;
      await indexShardStubOf(env, agentId, r.key, state.shards).removeIfNotNewer(r.key, r.removed_at);
      await indexShardStubOf(env, agentId, r.session_id, state.shards).forgetSessionId(r.session_id);
    }
  } catch (err) {
    const attempts = state.attempts + 1;
    if (attempts >= MOVE_MAX_ATTEMPTS) {
      sql.exec("DELETE FROM move_state");
      log.error("registry_move_abandoned", {
        attempts,
        error: err,
        left: "rows stay in the pre-sharding object and are still read; the next read restarts the move",
      });
      return;
    }
    sql.exec("UPDATE move_state SET attempts = ?", attempts);
    await ctx.storage.setAlarm(Date.now() + backoffDelayMs(MOVE_BACKOFF, attempts));
    return;
  }
  ctx.storage.transactionSync(() => {
    for (const r of rows) sql.exec("DELETE FROM sessions WHERE key = ? AND updated_at = ?", r.key, r.updated_at);
    for (const r of removed) sql.exec("DELETE FROM move_removed WHERE key = ? AND removed_at = ?", r.key, r.removed_at);
    sql.exec("UPDATE move_state SET attempts = 0");
  });
  await ctx.storage.setAlarm(Date.now());
}

/**
 * Rows and their sessionId locators, grouped by shard: one RPC per shard touched. `epoch`: the caller's
 * layout, checked by each shard (src/registry/index-split.ts); the legacy mover passes none.
 */
export async function copyToShards(env: Env, shards: number, entries: IndexEntry[], epoch?: number): Promise<void> {
  type Batch<T> = { agentId: string; shard: number; items: T[] };
  const group = <T>(into: Map<string, Batch<T>>, agentId: string, value: string, item: T) => {
    const shard = shardOf(value, shards);
    const id = `${agentId}\n${shard}`;
    if (!into.has(id)) into.set(id, { agentId, shard, items: [] });
    into.get(id)!.items.push(item);
  };
  const rows = new Map<string, Batch<IndexEntry>>();
  const ids = new Map<string, Batch<{ sessionId: string; key: string; spawnedBy: string | null }>>();
  for (const e of entries) {
    group(rows, e.agentId, e.key, e);
    group(ids, e.agentId, e.sessionId, { sessionId: e.sessionId, key: e.key, spawnedBy: e.spawnedBy });
  }
  await Promise.all([
    ...[...rows.values()].map((b) => indexShardStub(env, b.agentId, b.shard).upsertMany(b.items, epoch)),
    ...[...ids.values()].map((b) => indexShardStub(env, b.agentId, b.shard).indexSessionIds(b.items, epoch)),
  ]);
}

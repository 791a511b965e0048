import { log } from "../log";
import { beginSplit } from "./index-split";
import { isPowerOfTwo, type Layout, type SplitTuning, sourcesOf } from "./layout-math";
import { MOVE_MAX_ATTEMPTS } from "./legacy-move";
import { indexShardStub } from "./registry-stubs";

/**
 * The layout record of an agent's index, kept in its shard 0 (every layout has one), and shard 0's work as
 * the coordinator of a layout change: it starts a split when a shard asks (src/registry/session-index.ts
 * passes on a shard's "hot"), seals the sources, counts them done, and checks from its alarm whether a split
 * layout has cooled enough to merge back (docs/scale.md, "The self-sizing index").
 */
export const LAYOUT_SCHEMA = "CREATE TABLE index_layout (shards INTEGER NOT NULL);";

/** Rows of the record added for the self-sizing index; a record from before them reads as fixed, epoch 1. */
export const LAYOUT_RECORD_SCHEMA = `
  ALTER TABLE index_layout ADD COLUMN mode TEXT NOT NULL DEFAULT 'fixed';
  ALTER TABLE index_layout ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE index_layout ADD COLUMN from_shards INTEGER;
  ALTER TABLE index_layout ADD COLUMN agent_id TEXT;
  ALTER TABLE index_layout ADD COLUMN tuning TEXT;
  ALTER TABLE index_layout ADD COLUMN cool_since INTEGER;
  ALTER TABLE index_layout ADD COLUMN next_check INTEGER;
  CREATE TABLE layout_sources (shard INTEGER PRIMARY KEY, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0);
`;

export type LayoutWant = { mode: "fixed"; shards: number } | { mode: "auto" };

type Record = {
  shards: number;
  mode: "fixed" | "auto";
  epoch: number;
  from_shards: number | null;
  agent_id: string | null;
  tuning: string | null;
  cool_since: number | null;
  next_check: number | null;
};

const layoutOf = (r: Record): Layout => ({ epoch: r.epoch, mode: r.mode, shards: r.shards, from: r.from_shards });

function record(sql: SqlStorage): Record | null {
  return sql.exec<Record>("SELECT * FROM index_layout").toArray()[0] ?? null;
}

export function readLayout(sql: SqlStorage): Layout | null {
  const r = record(sql);
  return r ? layoutOf(r) : null;
}

/** The recorded layout, recording `want` when none is recorded yet (auto starts at one object). */
export function claimLayout(sql: SqlStorage, want: LayoutWant, agentId: string): Layout {
  const r = record(sql);
  if (r) return layoutOf(r);
  sql.exec(
    "INSERT INTO index_layout (shards, mode, epoch, agent_id) VALUES (?, ?, 1, ?)",
    want.mode === "fixed" ? want.shards : 1,
    want.mode,
    agentId,
  );
  return layoutOf(record(sql)!);
}

/** An empty index takes a new layout (compare-and-set on the epoch); null if the record changed meanwhile. */
export function replaceLayout(sql: SqlStorage, epoch: number, want: LayoutWant): Layout | null {
  const shards = want.mode === "fixed" ? want.shards : 1;
  // The new epoch is past every seal of the old layout's shards: they were empty, nothing moved.
  const written = sql.exec(
    "UPDATE index_layout SET shards = ?, mode = ?, epoch = epoch + 1, from_shards = NULL WHERE epoch = ? AND from_shards IS NULL",
    shards,
    want.mode,
    epoch,
  ).rowsWritten;
  return written > 0 ? readLayout(sql) : null;
}

/** How often a split layout is checked for cooling: a quarter of the cool period, between 1 s and 10 min. */
const checkMsOf = (t: SplitTuning) => Math.min(600_000, Math.max(1_000, Math.floor(t.coolMs / 4)));

/**
 * Shard 0 only: a shard of layout `epoch` measured itself past a threshold. Starts doubling the layout
 * unless it already changed, is moving, is fixed or is at `maxShards`. Shard 0 is a source of every split:
 * it is sealed in the same transaction that writes the new record, so from then on nobody with the old
 * layout reaches it; the other sources are sealed by `sealSources` before their rows move.
 */
export function startSplit(sql: SqlStorage, agentId: string, epoch: number, tuning: SplitTuning): boolean {
  const r = record(sql);
  if (r?.mode !== "auto" || r.epoch !== epoch || r.from_shards !== null) return false;
  if (!isPowerOfTwo(r.shards) || r.shards * 2 > tuning.maxShards) return false;
  const next: Layout = { epoch: r.epoch + 1, mode: "auto", shards: r.shards * 2, from: r.shards };
  writeChange(sql, next, JSON.stringify(tuning));
  beginSplit(sql, { agentId, shard: 0, epoch: next.epoch, toShards: next.shards });
  sql.exec("UPDATE layout_sources SET state = 'moving' WHERE shard = 0");
  log.info("registry_split_started", { agentId, from: r.shards, to: next.shards, epoch: next.epoch });
  return true;
}

function writeChange(sql: SqlStorage, next: Layout, tuning: string | null): void {
  sql.exec(
    "UPDATE index_layout SET shards = ?, from_shards = ?, epoch = ?, tuning = COALESCE(?, tuning), cool_since = NULL",
    next.shards,
    next.from,
    next.epoch,
    tuning,
  );
  sql.exec("DELETE FROM layout_sources");
  for (const n of sourcesOf(next)) sql.exec("INSERT INTO layout_sources (shard, state) VALUES (?, 'seal')", n);
}

/** Shard 0 only: source `shard` of move `epoch` holds nothing of others'. The last one ends the move. */
export function sourceDone(sql: SqlStorage, epoch: number, shard: number): void {
  const r = record(sql);
  if (!r || r.epoch !== epoch || r.from_shards === null) return;
  sql.exec("UPDATE layout_sources SET state = 'done' WHERE shard = ?", shard);
  if (sql.exec("SELECT 1 FROM layout_sources WHERE state <> 'done'").toArray().length > 0) return;
  sql.exec("DELETE FROM layout_sources");
  const tuning = r.tuning ? (JSON.parse(r.tuning) as SplitTuning) : null;
  sql.exec(
    "UPDATE index_layout SET from_shards = NULL, epoch = epoch + 1, cool_since = NULL, next_check = ?",
    tuning && r.shards > 1 ? Date.now() + checkMsOf(tuning) : null,
  );
  log.info("registry_layout_settled", { agentId: r.agent_id, shards: r.shards, epoch: r.epoch + 1 });
}

/**
 * Shard 0's alarm as coordinator. While a move runs: seal the sources not sealed yet (retried, bounded) and,
 * every check period, restart the moves of sources not done (a stalled one resumes). While a split layout
 * is settled: every check period, ask each shard for its rows and write rate; once all have stayed under a
 * quarter of both thresholds for `coolMs`, halve the layout (a merge: the upper half moves down). Returns
 * when to run again (null: nothing to watch).
 */
export async function coordinate(ctx: DurableObjectState, env: Pick<Env, "REGISTRY">): Promise<number | null> {
  const sql = ctx.storage.sql;
  const r = record(sql);
  if (r?.mode !== "auto" || !r.agent_id || !r.tuning) return null;
  const tuning = JSON.parse(r.tuning) as SplitTuning;
  const now = Date.now();
  if (r.from_shards !== null) {
    const checkDue = r.next_check === null || now >= r.next_check;
    const pending = await sealSources(ctx, env, r.agent_id, layoutOf(r), checkDue);
    if (checkDue) sql.exec("UPDATE index_layout SET next_check = ?", now + checkMsOf(tuning));
    return pending ? now + 2_000 : now + checkMsOf(tuning);
  }
  if (r.shards <= 1) return null;
  if (r.next_check !== null && now < r.next_check) return r.next_check;
  const loads = await Promise.all(
    Array.from({ length: r.shards }, (_, n) => indexShardStub(env, r.agent_id!, n).load()),
  );
  const cool = loads.every((l) => l.rows < tuning.rows / 4 && l.writesPerSecond < tuning.writesPerSecond / 4);
  const since = cool ? (r.cool_since ?? now) : null;
  if (cool && now - since! >= tuning.coolMs && isPowerOfTwo(r.shards)) {
    const next: Layout = { epoch: r.epoch + 1, mode: "auto", shards: r.shards / 2, from: r.shards };
    writeChange(sql, next, null);
    log.info("registry_merge_started", { agentId: r.agent_id, from: r.shards, to: next.shards, epoch: next.epoch });
    await sealSources(ctx, env, r.agent_id, next, false);
    return now;
  }
  sql.exec("UPDATE index_layout SET cool_since = ?, next_check = ?", since, now + checkMsOf(tuning));
  return now + checkMsOf(tuning);
}

/**
 * Seal the sources still marked `seal` (and, with `restart`, every source not done). A seal that keeps
 * failing is logged after MOVE_MAX_ATTEMPTS tries and retried at the next check: the move cannot be undone
 * once a source is sealed, and readers read every source and target meanwhile, so nothing is lost. Returns
 * whether a source is still waiting to be sealed.
 */
async function sealSources(
  ctx: DurableObjectState,
  env: Pick<Env, "REGISTRY">,
  agentId: string,
  l: Layout,
  restart: boolean,
): Promise<boolean> {
  const sql = ctx.storage.sql;
  const states = restart ? "state <> 'done'" : "state = 'seal'";
  const todo = sql
    .exec<{ shard: number; attempts: number }>(`SELECT shard, attempts FROM layout_sources WHERE ${states}`)
    .toArray();
  let pending = false;
  for (const t of todo) {
    const ask = { agentId, shard: t.shard, epoch: l.epoch, toShards: l.shards };
    try {
      if (t.shard === 0) beginSplit(sql, ask);
      else await indexShardStub(env, agentId, t.shard).beginSplit(ask);
      sql.exec("UPDATE layout_sources SET state = 'moving', attempts = 0 WHERE shard = ?", t.shard);
    } catch (err) {
      const attempts = t.attempts + 1;
      sql.exec("UPDATE layout_sources SET attempts = ? WHERE shard = ?", attempts, t.shard);
      if (attempts >= MOVE_MAX_ATTEMPTS) log.error("registry_seal_failing", { agentId, shard: t.shard, error: err });
      else pending = true;
    }
  }
  return pending;
}

import { DurableObject } from "cloudflare:workers";
import { runMigrations } from "../migrations";
import { beginSplit, SPLIT_SCHEMA, STALE_LAYOUT, sealOf, splitBatch, splitting } from "./index-split";
import type { Layout, SplitTuning } from "./layout-math";
import {
  claimLayout,
  coordinate,
  LAYOUT_RECORD_SCHEMA,
  LAYOUT_SCHEMA,
  type LayoutWant,
  readLayout,
  replaceLayout,
  sourceDone,
  startSplit,
} from "./layout-record";
import { MOVE_SCHEMA, moveBatch } from "./legacy-move";
import { indexShardStub } from "./registry-stubs";
import type { IndexEntry, SessionRow } from "./row";
import { childOf, type ListQuery, listShard, type ShardPage } from "./shard-list";
import { WritePacer } from "./write-pacing";

export type { ListPage, ListQuery, ListScope, ShardPage } from "./shard-list";
export { SEARCH_SCAN_ROWS } from "./shard-list";

/**
 * One shard of an agent's session index (`registry:<agentId>:<shard>`, placed by src/registry/session-index.ts).
 * It holds the rows whose key hashes to it and the sessionId locators whose sessionId hashes to it.
 * Every list and resolve is one indexed query (src/registry/shard-list.ts). Calls from the index carry the
 * caller's layout epoch: a shard sealed by a later layout refuses them (src/registry/index-split.ts). The same class serves the pre-sharding
 * object `registry:<agentId>` while it moves its rows out (src/registry/legacy-move.ts), and shard 0 keeps
 * the agent's layout record and coordinates its splits and merges (src/registry/layout-record.ts).
 */
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
  // The self-sizing index: the layout record's epoch and move state, a shard's seal and its part of a move.
  LAYOUT_RECORD_SCHEMA,
  SPLIT_SCHEMA,
];

/** What a shard measures against the split thresholds on each write of an auto layout (src/registry/layout-math.ts). */
type HotCheck = Pick<SplitTuning, "rows" | "writesPerSecond" | "sustainMs">;

/** A hot shard says so at most this often: its writers' split requests to shard 0 stay rare. */
const HOT_REPEAT_MS = 5_000;

export class RegistryObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly pacer = new WritePacer();
  /** The seal (src/registry/index-split.ts), read once per instance; changed only by beginSplit. */
  private seal: number | null = null;
  /** Rows here, counted on the first auto write of this instance and kept since (null: count again). */
  private rows: number | null = null;
  private hotSince: number | null = null;
  private hotSaidAt = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    ctx.blockConcurrencyWhile(async () => runMigrations(this.sql, MIGRATIONS));
  }

  /** Refuse a caller whose layout is older than this shard's seal: it re-reads the layout and retries there. */
  private guard(epoch: number | undefined): void {
    if (epoch === undefined) return;
    this.seal ??= sealOf(this.sql);
    if (epoch < this.seal) throw new Error(`${STALE_LAYOUT}: epoch ${epoch} < ${this.seal}`);
  }

  /**
   * Upsert a session's row. Writes can arrive out of order (an inline write racing a coalesced one),
   * so an older row never overwrites a newer one. `withLocator`: the sessionId's locator lives in this
   * shard too (src/registry/session-id.ts) and is written in the same transaction, so the row is never
   * listed without being resolvable. `auto`: the layout sizes itself, and `hot` says this shard passed a
   * split threshold (the caller asks shard 0 to split, src/registry/session-index.ts).
   */
  async upsert(
    e: IndexEntry,
    opts: { withLocator?: boolean; epoch?: number; auto?: HotCheck } = {},
  ): Promise<{ nextWriteInMs: number; hot?: true }> {
    this.guard(opts.epoch);
    const isNew =
      opts.auto !== undefined &&
      this.rows !== null &&
      this.sql.exec("SELECT 1 FROM sessions WHERE key = ?", e.key).toArray().length === 0;
    this.ctx.storage.transactionSync(() => {
      if (opts.withLocator) this.writeLocator(e.sessionId, e.key, e.spawnedBy);
      this.writeRow(e);
    });
    const now = Date.now();
    const nextWriteInMs = this.pacer.record(now);
    if (!opts.auto) return { nextWriteInMs };
    if (this.rows === null) this.rows = this.countRows();
    else if (isNew) this.rows++;
    return this.isHot(opts.auto, now) ? { nextWriteInMs, hot: true } : { nextWriteInMs };
  }

  /** Past the row threshold, or above the write rate for the sustain period; said once per HOT_REPEAT_MS. */
  private isHot(t: HotCheck, now: number): boolean {
    if (this.pacer.rate(now) > t.writesPerSecond) this.hotSince ??= now;
    else this.hotSince = null;
    const hot = this.rows! > t.rows || (this.hotSince !== null && now - this.hotSince >= t.sustainMs);
    if (!hot || now - this.hotSaidAt < HOT_REPEAT_MS) return false;
    this.hotSaidAt = now;
    return true;
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
  async upsertMany(entries: IndexEntry[], epoch?: number): Promise<void> {
    this.guard(epoch);
    this.rows = null;
    this.ctx.storage.transactionSync(() => {
      for (const e of entries) this.writeRow(e);
    });
  }

  /** A deleted session. While rows move out of this object, the deletion is remembered so a copy in flight is removed too. */
  async remove(key: string, epoch?: number): Promise<void> {
    this.guard(epoch);
    const had = this.sql
      .exec<{ session_id: string }>("SELECT session_id FROM sessions WHERE key = ?", key)
      .toArray()[0];
    this.sql.exec("DELETE FROM sessions WHERE key = ?", key);
    if (had && this.rows !== null) this.rows--;
    if (had && (this.sql.exec("SELECT 1 FROM move_state").toArray().length > 0 || splitting(this.sql))) {
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

  /**
   * Drop a stale copy (its session now writes to its shard under the new layout: the pre-sharding object's,
   * or a moving source's); says whether any row is left here.
   */
  async forget(key: string, epoch?: number): Promise<{ drained: boolean }> {
    this.guard(epoch);
    this.sql.exec("DELETE FROM sessions WHERE key = ?", key);
    return { drained: !this.hasAnyRow() };
  }

  /** Many stale copies at once (src/registry/session-index.ts `upsertMany` while rows move). */
  async forgetMany(keys: string[], epoch?: number): Promise<void> {
    this.guard(epoch);
    this.rows = null;
    this.ctx.storage.transactionSync(() => {
      for (const key of keys) this.sql.exec("DELETE FROM sessions WHERE key = ?", key);
    });
  }

  /** Record where a sessionId's session lives (write-once: a session's sessionId never changes). */
  async indexSessionId(sessionId: string, key: string, spawnedBy: string | null, epoch?: number): Promise<void> {
    this.guard(epoch);
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

  async indexSessionIds(
    ids: { sessionId: string; key: string; spawnedBy: string | null }[],
    epoch?: number,
  ): Promise<void> {
    this.guard(epoch);
    this.ctx.storage.transactionSync(() => {
      for (const i of ids) this.writeLocator(i.sessionId, i.key, i.spawnedBy);
    });
  }

  /** A deleted session's locator; while this shard gives locators away, remembered so a copy in flight goes too. */
  async forgetSessionId(sessionId: string, epoch?: number): Promise<void> {
    this.guard(epoch);
    const had = this.sql.exec("DELETE FROM session_ids WHERE session_id = ?", sessionId).rowsWritten > 0;
    if (had && splitting(this.sql))
      this.sql.exec("INSERT INTO split_forgotten (session_id) VALUES (?) ON CONFLICT DO NOTHING", sessionId);
  }

  /** The key of a sessionId from the locator table (at most one: sessionIds are random UUIDs). */
  async lookupSessionId(id: string, spawnedBy?: string, epoch?: number): Promise<string[]> {
    this.guard(epoch);
    const [parent, parentArgs] = childOf(spawnedBy);
    return this.sql
      .exec<{ key: string }>(`SELECT key FROM session_ids WHERE session_id = ?${parent}`, id, ...parentArgs)
      .toArray()
      .map((r) => r.key);
  }

  /** Shard 0 only: the index's layout, recording `want` when none is recorded yet (src/registry/index-layout.ts). */
  async claimLayout(want: LayoutWant, agentId: string): Promise<Layout> {
    return this.watched(claimLayout(this.sql, want, agentId));
  }

  /** Shard 0 only: the recorded layout (a caller refused by a seal re-reads it). */
  async readLayout(): Promise<Layout | null> {
    const layout = readLayout(this.sql);
    return layout && this.watched(layout);
  }

  /**
   * A move never waits on a lost alarm: readers of a moving layout re-read it every second
   * (src/registry/index-layout.ts), and each read re-arms a missing alarm, which resumes the move.
   */
  private async watched(layout: Layout): Promise<Layout> {
    if (layout.from !== null && (await this.ctx.storage.getAlarm()) === null)
      await this.ctx.storage.setAlarm(Date.now());
    return layout;
  }

  /** Shard 0 only: an empty index takes `want` if the record is still at `epoch`; null if it changed. */
  async replaceLayout(epoch: number, want: LayoutWant): Promise<Layout | null> {
    return replaceLayout(this.sql, epoch, want);
  }

  /** Shard 0 only: a shard of layout `epoch` is hot; split unless the layout changed (src/registry/layout-record.ts). */
  async requestSplit(agentId: string, epoch: number, tuning: SplitTuning): Promise<Layout | null> {
    if (startSplit(this.sql, agentId, epoch, tuning)) {
      this.seal = null;
      await this.ctx.storage.setAlarm(Date.now());
    }
    return readLayout(this.sql);
  }

  /** Shard 0 only: a source of move `epoch` is done. */
  async sourceDone(epoch: number, shard: number): Promise<void> {
    sourceDone(this.sql, epoch, shard);
  }

  /** A source of a layout change: seal here and start moving out (src/registry/index-split.ts). */
  async beginSplit(a: { agentId: string; shard: number; epoch: number; toShards: number }): Promise<void> {
    const started = beginSplit(this.sql, a);
    this.seal = null;
    if (started) await this.ctx.storage.setAlarm(Date.now());
  }

  /** Rows here and the write rate now: the coordinator's cooling check (src/registry/layout-record.ts). */
  async load(): Promise<{ rows: number; writesPerSecond: number }> {
    return { rows: this.countRows(), writesPerSecond: this.pacer.rate(Date.now()) };
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

  /**
   * The one alarm serves three kinds of work, each a row here: the pre-sharding object's move, shard 0's
   * coordination of a layout change, and a source shard's part of it. Each says when it wants to run again.
   */
  async alarm(): Promise<void> {
    await moveBatch(this.ctx, this.env);
    const coordinator = await coordinate(this.ctx, this.env);
    const done = async (agentId: string, epoch: number, shard: number) => {
      if (shard === 0) sourceDone(this.sql, epoch, shard);
      else await indexShardStub(this.env, agentId, 0).sourceDone(epoch, shard);
    };
    const mover = await splitBatch(this.ctx, this.env, done);
    // Rows left this shard: its count and rate are measured again before it can call itself hot.
    if (mover !== null || coordinator !== null) [this.rows, this.hotSince] = [null, null];
    const next = [coordinator, mover].filter((t): t is number => t !== null);
    if (next.length > 0) await this.ctx.storage.setAlarm(Math.min(...next));
  }

  private countRows(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sessions").one().n;
  }

  private hasAnyRow(): boolean {
    return this.sql.exec("SELECT 1 FROM sessions LIMIT 1").toArray().length > 0;
  }

  async get(key: string, epoch?: number): Promise<{ key: string; spawnedBy: string | null; row: SessionRow } | null> {
    this.guard(epoch);
    const r = this.sql
      .exec<{ key: string; spawned_by: string | null; row_json: string }>(
        "SELECT key, spawned_by, row_json FROM sessions WHERE key = ?",
        key,
      )
      .toArray()[0];
    return r ? { key: r.key, spawnedBy: r.spawned_by, row: JSON.parse(r.row_json) } : null;
  }

  async list(q: ListQuery, epoch?: number): Promise<ShardPage> {
    this.guard(epoch);
    return listShard(this.sql, q);
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
  async resolveLabelRows(
    label: string,
    spawnedBy?: string,
    epoch?: number,
  ): Promise<{ key: string; updatedAt: number }[]> {
    this.guard(epoch);
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
    return this.countRows();
  }
}

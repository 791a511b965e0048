import type { Config } from "../config/schema";
import { isStaleLayout, knownLayout, layoutFor, noteLayout, refreshLayout } from "./index-layout";
import { homeOf, type Layout, oldHomeOf, type SplitTuning, sourcesOf, spanOf, targetsOf } from "./layout-math";
import type { LayoutWant } from "./layout-record";
import { copyToShards } from "./legacy-move";
import { before, mergeShardPages, mergeSorted, shardSource } from "./page-merge";
import type { ListPage, ListQuery, ShardPage } from "./registry-object";
import { indexShardStub, legacyIndexStub, type RegistryStub } from "./registry-stubs";
import type { IndexEntry } from "./row";
import { INDEX_SHARDS_MAX } from "./shard-hash";

export { canonicalKeyOfRow, mergePages } from "./page-merge";

type IndexedRow = { key: string; spawnedBy: string | null; row: IndexEntry["row"] };

/**
 * The session index of one agent, spread over registry objects `registry:<agentId>:<shard>` as its layout
 * says (src/registry/index-layout.ts): a fixed `indexShards`, or — unset — a layout that starts at one object
 * and doubles when a shard gets hot, halving back when all cool (docs/scale.md, "The self-sizing index"). A
 * row lives in the shard of its key's hash; a sessionId's locator in the shard of the sessionId's hash, so a
 * key or a sessionId is one lookup in one object. Listings ask each shard for one page and merge. Every
 * caller reaches the index through here.
 *
 * While rows move between layouts, a key's old and new shard may differ: reads ask the old one (a sealed
 * source) first and the new one after, writes go to the new one and drop the old copy, so a row is always
 * found where a read looks, and each page is still one merge by position (cursors are positions, valid
 * under every layout).
 */
export function sessionIndex(env: Env, cfg: Config, agentId: string): SessionIndex {
  const split = cfg.session.indexSplit;
  return new SessionIndex(env, indexShardsOf(cfg, agentId), agentId, {
    rows: split.rows,
    writesPerSecond: split.writesPerSecond,
    sustainMs: split.sustainSeconds * 1_000,
    coolMs: split.coolSeconds * 1_000,
    maxShards: split.maxShards,
  });
}

/** An agent's fixed shard count (its own `indexShards`, else `session.indexShards`); undefined: it sizes itself. */
function indexShardsOf(cfg: Config, agentId: string): number | undefined {
  return cfg.agents.roster.find((a) => a.id === agentId)?.indexShards ?? cfg.session.indexShards;
}

/**
 * The count a new sessionId is drawn to share its key's shard under (src/registry/session-id.ts): the fixed
 * count, or for a self-sizing index the largest it can reach, which every smaller power of two divides.
 */
export function sessionIdPlacement(cfg: Config, agentId: string): number {
  return indexShardsOf(cfg, agentId) ?? INDEX_SHARDS_MAX;
}

/** The thresholds used when none are given (the config's defaults, docs/limits.md). */
const DEFAULT_TUNING: SplitTuning = {
  rows: 250_000,
  writesPerSecond: 150,
  sustainMs: 60_000,
  coolMs: 3_600_000,
  maxShards: INDEX_SHARDS_MAX,
};

/** A caller refused by a sealed shard re-reads the layout and tries again; more than this many changes in one call is a fault. */
const STALE_RETRIES = 3;

/**
 * Agents whose pre-sharding object this isolate has seen empty. Nothing writes to that object after the
 * upgrade, so once empty it stays empty and is never asked again.
 */
const drainedLegacy = new Set<string>();

const EMPTY_SHARD_PAGE: ShardPage = { keys: [], updatedAt: [], rows: [], next: null };

/**
 * Rows a shard is first asked for when `shards` shards share a page of `limit`: its fair share with room
 * to spare, not the whole page (16 shards × a full page each parsed and shipped 16× the rows a page
 * shows, docs/scale.md). A shard that turns out to hold more of the page is asked again (SessionIndex.list).
 */
function firstAsk(limit: number, shards: number): number {
  return shards === 1 ? limit : Math.min(limit, Math.ceil((2 * limit) / shards) + 2);
}

const unique = (xs: number[]) => [...new Set(xs)];

export class SessionIndex {
  private readonly want: LayoutWant;

  /** `fixedShards`: a fixed count (the config's `indexShards`); undefined: the index sizes itself by `tuning`. */
  constructor(
    private readonly env: Env,
    fixedShards: number | undefined,
    readonly agentId: string,
    private readonly tuning: SplitTuning = DEFAULT_TUNING,
  ) {
    this.want = fixedShards === undefined ? { mode: "auto" } : { mode: "fixed", shards: fixedShards };
  }

  private shard(n: number): RegistryStub {
    return indexShardStub(this.env, this.agentId, n);
  }

  /** Every shard of the layout last seen (a fixed count's, before the first call). */
  allShards(): RegistryStub[] {
    const l = knownLayout(this.agentId);
    const span = l ? spanOf(l) : this.want.mode === "fixed" ? this.want.shards : 1;
    return Array.from({ length: span }, (_, n) => this.shard(n));
  }

  /** The current layout (claimed on first use). */
  layout(): Promise<Layout> {
    return layoutFor(this.env, this.agentId, this.want);
  }

  /** Run `op` with the layout; a shard sealed by a later layout refuses it, and it runs again with that one. */
  private async withLayout<T>(op: (l: Layout) => Promise<T>): Promise<T> {
    let l = await this.layout();
    for (let attempt = 0; ; attempt++) {
      try {
        return await op(l);
      } catch (err) {
        if (attempt >= STALE_RETRIES || !isStaleLayout(err)) throw err;
        l = await refreshLayout(this.env, this.agentId);
      }
    }
  }

  /** The pre-sharding object while it still holds rows (asking it starts its move), else null. */
  private async legacy(l: Layout): Promise<RegistryStub | null> {
    if (drainedLegacy.has(this.agentId)) return null;
    const stub = legacyIndexStub(this.env, this.agentId);
    if ((await stub.moveOut(this.agentId, l.shards)).pending) return stub;
    drainedLegacy.add(this.agentId);
    return null;
  }

  /**
   * The shards to read, in rounds: one round when nothing moves; while rows move, the sources (which give
   * rows away) in a round before the targets, so a row copied and deleted between the two reads is seen in
   * the second.
   */
  private rounds(l: Layout, key?: string): number[][] {
    if (key !== undefined) {
      const [old, now] = [oldHomeOf(l, key), homeOf(l, key)];
      return old === now ? [[now]] : [[old], [now]];
    }
    if (l.from === null) return [Array.from({ length: l.shards }, (_, n) => n)];
    return [sourcesOf(l), targetsOf(l)];
  }

  /**
   * One page. Nothing moving: each shard is asked for its share of the page (`firstAsk`) after the cursor
   * with visibility in its query, then merged by position; only the rows of the page are parsed. While
   * rows move: the rounds (above), each shard asked for a whole page, since a second ask of a source could
   * miss a row moved after the targets were read. `self` reads the caller's shard; `tree` asks every shard
   * for the caller's children through each shard's spawned_by index.
   */
  async list(q: ListQuery): Promise<ListPage> {
    const limit = Math.max(1, Math.min(q.limit, 1000));
    return this.withLayout(async (l) => {
      // The pre-sharding object is read BEFORE the shards: a row gone from it by then was copied to its
      // shard before it went, so one of the two reads sees it (a concurrent read could see neither).
      const legacy = await this.legacy(l);
      const old = legacy ? ((await legacy.list(q)) as ShardPage) : EMPTY_SHARD_PAGE;
      const rounds = this.rounds(l, q.scope.type === "self" ? q.scope.key : undefined);
      if (rounds.length > 1) {
        const pages: ShardPage[] = [];
        for (const round of rounds)
          pages.push(...(await Promise.all(round.map((n) => this.shard(n).list({ ...q, limit }, l.epoch)))));
        return mergeShardPages([...pages, old], limit);
      }
      const sources = rounds[0].map((n) => this.shard(n));
      const ask = firstAsk(limit, sources.length);
      const pages = await Promise.all(sources.map((s) => s.list({ ...q, limit: ask }, l.epoch) as Promise<ShardPage>));
      // One object (every agent that fits one, docs/scale.md): its page is the page when it is full or the
      // shard's end — nothing to ask again, so no look-ahead merge; the one merge below keeps the cursor rules.
      const [only] = pages;
      if (pages.length === 1 && old === EMPTY_SHARD_PAGE && (only.next === null || only.keys.length >= limit))
        return mergeShardPages(pages, limit);
      // A shard with more rows whose last row is newer than the page's last (or the page is short) may hold
      // rows of this page: ask it once more, after its last row, for a whole page. Then every shard's rows
      // down to the page's end are known, so the merge is exact.
      const first = mergeSorted([...pages, old].map(shardSource), limit, false);
      const lastOfPage = first.picks.length === limit ? first.last : null;
      await Promise.all(
        pages.map(async (page, i) => {
          const n = page.keys.length;
          if (!page.next || n === 0) return;
          if (lastOfPage && !before({ updatedAt: page.updatedAt[n - 1], key: page.keys[n - 1] }, lastOfPage)) return;
          const more = (await sources[i].list({ ...q, limit, cursor: page.next }, l.epoch)) as ShardPage;
          pages[i] = {
            keys: [...page.keys, ...more.keys],
            updatedAt: [...page.updatedAt, ...more.updatedAt],
            rows: [...page.rows, ...more.rows],
            next: more.next,
          };
        }),
      );
      return mergeShardPages([...pages, old], limit);
    });
  }

  async get(key: string): Promise<IndexedRow | null> {
    return this.withLayout(async (l) => {
      // Pre-sharding object first (see list). Typed through `unknown`: the stub's inferred RPC type of a row is too deep for the checker.
      const legacy = await this.legacy(l);
      const old = legacy ? ((await legacy.get(key)) as unknown as IndexedRow | null) : null;
      if (old) return old;
      for (const [n] of this.rounds(l, key)) {
        const found = (await this.shard(n).get(key, l.epoch)) as unknown as IndexedRow | null;
        if (found) return found;
      }
      return null;
    });
  }

  /** Keys whose sessionId is `id`: the locator's shard (its old one first while locators move). */
  async resolveSessionId(id: string, spawnedBy?: string): Promise<string[]> {
    return this.withLayout(async (l) => {
      const legacy = await this.legacy(l);
      const old = legacy ? await legacy.resolveSessionId(id, spawnedBy) : [];
      if (old.length > 0) return old;
      for (const [n] of this.rounds(l, id)) {
        const found = await this.shard(n).lookupSessionId(id, spawnedBy, l.epoch);
        if (found.length > 0) return found;
      }
      return [];
    });
  }

  /**
   * Labels have no locator (a label changes with every PATCH): a caller's children are found through
   * every shard's spawned_by index, any label through every shard's label index — N indexed lookups of
   * at most 5 rows each, newest first.
   */
  async resolveLabel(label: string, spawnedBy?: string): Promise<string[]> {
    return this.withLayout(async (l) => {
      const legacy = await this.legacy(l);
      const found = legacy ? [await legacy.resolveLabelRows(label, spawnedBy)] : [];
      for (const round of this.rounds(l))
        found.push(...(await Promise.all(round.map((n) => this.shard(n).resolveLabelRows(label, spawnedBy, l.epoch)))));
      const rows = found.flat().sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : -1));
      return [...new Set(rows.map((r) => r.key))].slice(0, 5);
    });
  }

  /**
   * Write a session's row (the session object's coalesced sync), with the sessionId locator when this
   * object has not written it yet: a row is never resolvable by key but not by sessionId. A locator in the
   * row's shard (every new session's, src/registry/session-id.ts) is written in the same call; one in
   * another shard (sessions created before that) is written first. While rows move, the row goes to its new
   * shard and its old copy is dropped after. A shard of a self-sizing layout that says it is hot makes this
   * writer ask shard 0 to split (src/registry/layout-record.ts).
   */
  async upsert(entry: IndexEntry, opts: { locatorWritten: boolean }): Promise<{ nextWriteInMs: number }> {
    return this.withLayout(async (l) => {
      const home = homeOf(l, entry.key);
      const together = !opts.locatorWritten && homeOf(l, entry.sessionId) === home;
      if (!opts.locatorWritten && !together)
        await this.shard(homeOf(l, entry.sessionId)).indexSessionId(
          entry.sessionId,
          entry.key,
          entry.spawnedBy,
          l.epoch,
        );
      const auto = l.mode === "auto" && l.from === null ? this.tuning : undefined;
      const paced = await this.shard(home).upsert(entry, { withLocator: together, epoch: l.epoch, auto });
      const oldHome = oldHomeOf(l, entry.key);
      if (oldHome !== home) await this.shard(oldHome).forget(entry.key, l.epoch);
      // A stale pre-sharding copy of this row would list twice (at its old position too): drop it.
      if (!drainedLegacy.has(this.agentId)) {
        const { drained } = await legacyIndexStub(this.env, this.agentId).forget(entry.key);
        if (drained) drainedLegacy.add(this.agentId);
      }
      // Not while the pre-sharding object still moves out: its mover places rows by the count it started with.
      if (paced.hot && drainedLegacy.has(this.agentId)) {
        const next = await this.shard(0).requestSplit(this.agentId, l.epoch, this.tuning);
        if (next) noteLayout(this.agentId, next);
      }
      return { nextWriteInMs: paced.nextWriteInMs };
    });
  }

  /** Many rows at once (seeding, bulk imports): one call per shard touched (and per old shard while rows move). */
  async upsertMany(entries: IndexEntry[]): Promise<void> {
    await this.withLayout(async (l) => {
      await copyToShards(this.env, l.shards, entries, l.epoch);
      const stale = new Map<number, string[]>();
      for (const e of entries) {
        const [old, now] = [oldHomeOf(l, e.key), homeOf(l, e.key)];
        if (old !== now) stale.set(old, [...(stale.get(old) ?? []), e.key]);
      }
      await Promise.all([...stale].map(([n, keys]) => this.shard(n).forgetMany(keys, l.epoch)));
    });
  }

  /** A deleted session: its row, its locator (in their old shards too while rows move), and any pre-sharding copy. */
  async remove(key: string, sessionId: string | undefined): Promise<void> {
    await this.withLayout(async (l) => {
      const rowShards = unique([oldHomeOf(l, key), homeOf(l, key)]);
      const idShards = sessionId ? unique([oldHomeOf(l, sessionId), homeOf(l, sessionId)]) : [];
      await Promise.all([
        ...rowShards.map((n) => this.shard(n).remove(key, l.epoch)),
        ...idShards.map((n) => this.shard(n).forgetSessionId(sessionId!, l.epoch)),
      ]);
      if (!drainedLegacy.has(this.agentId)) await legacyIndexStub(this.env, this.agentId).remove(key);
    });
  }

  /** Rows over all shards of the layout (tests, bench). */
  async count(): Promise<number> {
    const l = await this.layout();
    const counts = await Promise.all(Array.from({ length: spanOf(l) }, (_, n) => this.shard(n).count()));
    return counts.reduce((a, b) => a + b, 0);
  }
}

import type { Config } from "../config/schema";
import { checkLayout } from "./index-layout";
import { copyToShards } from "./legacy-move";
import type { ListPage, ListQuery, ShardPage } from "./registry-object";
import { indexShardStub, indexShardStubOf, legacyIndexStub, type RegistryStub } from "./registry-stubs";
import type { IndexEntry, SessionRow } from "./row";
import { shardOf } from "./shard-hash";

type IndexedRow = { key: string; spawnedBy: string | null; row: SessionRow };

/**
 * The session index of one agent, spread over `session.indexShards` registry objects
 * (`registry:<agentId>:<shard>`). A row lives in the shard of its key's hash; a sessionId's locator in
 * the shard of the sessionId's hash, so a key or a sessionId is one lookup in one object. Listings ask
 * each shard for one page and merge (docs/scale.md). Every caller reaches the index through here.
 */
export function sessionIndex(env: Env, cfg: Config, agentId: string): SessionIndex {
  return new SessionIndex(env, indexShardsOf(cfg, agentId), agentId);
}

/** An agent's shard count: its own `indexShards` (a small agent 1, the hot one 64), else `session.indexShards`. */
export function indexShardsOf(cfg: Config, agentId: string): number {
  return cfg.agents.roster.find((a) => a.id === agentId)?.indexShards ?? cfg.session.indexShards;
}

/**
 * Agents whose pre-sharding object this isolate has seen empty. Nothing writes to that object after the
 * upgrade, so once empty it stays empty and is never asked again.
 */
const drainedLegacy = new Set<string>();

const EMPTY_SHARD_PAGE: ShardPage = { keys: [], updatedAt: [], rows: [], next: null };

/** Rows show `main` for the global bucket; its key (and cursor position) is `global`. */
export function canonicalKeyOfRow(row: SessionRow): string {
  return row.key === "main" ? "global" : row.key;
}

type Position = { updatedAt: number; key: string };

/** Listing order: updatedAt desc, then key desc (the order of every shard's index). */
function before(a: Position, b: Position): boolean {
  if (a.updatedAt !== b.updatedAt) return a.updatedAt > b.updatedAt;
  return a.key > b.key;
}

/** Sorted sources as the k-way merge reads them: a length and the position of each entry. */
interface Sorted {
  length: number;
  at(i: number): Position;
  more: boolean;
  /** Where the source's next page starts (its cursor), when more follow. */
  next?: Position | null;
}

/**
 * K-way merge of sorted sources into at most `limit` picks ([source, index]). A key can sit in two sources
 * only while the pre-sharding object moves out (an identical copy): the first (newest) wins. More rows may
 * follow when entries were left over or any source said so; the cursor is the last pick's position, valid
 * for every shard.
 */
function mergeSorted(
  sources: Sorted[],
  limit: number,
  stopAtFrontier = true,
): { picks: [number, number][]; last: Position | null; next: Position | null } {
  const at = sources.map(() => 0);
  const picks: [number, number][] = [];
  const seen = new Set<string>();
  let leftOver = false;
  let last: Position | null = null;
  // The newest cursor of a source with more: below it that source is unread, so the merge stops there (a
  // search page whose scan stopped early: src/registry/registry-object.ts). A full page's cursor is its last
  // row, which a merge of `limit` picks never passes. (Not for a first look: SessionIndex.list asks again.)
  let frontier: Position | null = null;
  if (stopAtFrontier)
    for (const s of sources) if (s.more && s.next && (!frontier || before(s.next, frontier))) frontier = s.next;
  let atFrontier = false;
  for (;;) {
    let best = -1;
    let bestPos: Position | null = null;
    for (let i = 0; i < sources.length; i++) {
      if (at[i] >= sources[i].length) continue;
      const p = sources[i].at(at[i]);
      if (!bestPos || before(p, bestPos)) [best, bestPos] = [i, p];
    }
    if (!bestPos) break;
    if (frontier && before(frontier, bestPos)) {
      atFrontier = true;
      break;
    }
    const index = at[best]++;
    if (seen.has(bestPos.key)) continue;
    if (picks.length === limit) {
      leftOver = true;
      break;
    }
    seen.add(bestPos.key);
    picks.push([best, index]);
    last = bestPos;
  }
  const more = leftOver || atFrontier || sources.some((s) => s.more);
  const cursor = atFrontier || (!last && frontier) ? frontier : last;
  return { picks, last, next: more && cursor ? { updatedAt: cursor.updatedAt, key: cursor.key } : null };
}

/** Merge of pages of parsed rows (sessions_list over several agents). */
export function mergePages(pages: ListPage[], limit: number): ListPage {
  const sources = pages.map((p) => ({
    length: p.rows.length,
    at: (i: number) => ({ updatedAt: p.rows[i].updatedAt, key: canonicalKeyOfRow(p.rows[i]) }),
    more: p.next !== null,
    next: p.next,
  }));
  const { picks, next } = mergeSorted(sources, limit);
  return { rows: picks.map(([s, i]) => pages[s].rows[i]), next };
}

const shardSource = (p: ShardPage): Sorted => ({
  length: p.keys.length,
  at: (i) => ({ updatedAt: p.updatedAt[i], key: p.keys[i] }),
  more: p.next !== null,
  next: p.next,
});

/** Merge of shard answers: picks by position, then parses only the picked rows. */
function mergeShardPages(pages: ShardPage[], limit: number): ListPage {
  const { picks, next } = mergeSorted(pages.map(shardSource), limit);
  return { rows: picks.map(([s, i]) => JSON.parse(pages[s].rows[i]) as SessionRow), next };
}

/**
 * Rows a shard is first asked for when `shards` shards share a page of `limit`: its fair share with room
 * to spare, not the whole page (16 shards × a full page each parsed and shipped 16× the rows a page
 * shows, docs/scale.md). A shard that turns out to hold more of the page is asked again (SessionIndex.list).
 */
function firstAsk(limit: number, shards: number): number {
  return shards === 1 ? limit : Math.min(limit, Math.ceil((2 * limit) / shards) + 2);
}

export class SessionIndex {
  constructor(
    private readonly env: Env,
    readonly shards: number,
    readonly agentId: string,
  ) {}

  private shard(n: number): RegistryStub {
    return indexShardStub(this.env, this.agentId, n);
  }

  /** The shard holding the row of `key`. */
  rowShard(key: string): RegistryStub {
    return indexShardStubOf(this.env, this.agentId, key, this.shards);
  }

  /** The shard holding the locator of `sessionId`. */
  idShard(sessionId: string): RegistryStub {
    return indexShardStubOf(this.env, this.agentId, sessionId, this.shards);
  }

  allShards(): RegistryStub[] {
    return Array.from({ length: this.shards }, (_, n) => this.shard(n));
  }

  /**
   * Before the first read of this isolate: the shard count is the one the rows were written with
   * (src/registry/index-layout.ts), and the pre-sharding object while it still holds rows, else null.
   */
  private async ready(): Promise<RegistryStub | null> {
    const [legacy] = await Promise.all([this.legacy(), checkLayout(this.env, this.agentId, this.shards)]);
    return legacy;
  }

  /** The pre-sharding object while it still holds rows (asking it starts its move), else null. */
  private async legacy(): Promise<RegistryStub | null> {
    if (drainedLegacy.has(this.agentId)) return null;
    const stub = legacyIndexStub(this.env, this.agentId);
    if ((await stub.moveOut(this.agentId, this.shards)).pending) return stub;
    drainedLegacy.add(this.agentId);
    return null;
  }

  /**
   * One page: each source is asked for its share of the page (`firstAsk`) after the cursor with
   * visibility in its query, then merged by position; only the rows of the page are parsed. `self`
   * reads the caller's shard; `tree` asks every shard for the caller's children through each shard's
   * spawned_by index (children live in their own key's shard).
   */
  async list(q: ListQuery): Promise<ListPage> {
    const sources = q.scope.type === "self" ? [this.rowShard(q.scope.key)] : this.allShards();
    // The pre-sharding object is read BEFORE the shards: a row gone from it by then was copied to its
    // shard before it went, so one of the two reads sees it (a concurrent read could see neither).
    const legacy = await this.ready();
    const old = legacy ? ((await legacy.list(q)) as ShardPage) : EMPTY_SHARD_PAGE;
    const limit = Math.max(1, Math.min(q.limit, 1000));
    const ask = firstAsk(limit, sources.length);
    const pages = await Promise.all(sources.map((s) => s.list({ ...q, limit: ask }) as Promise<ShardPage>));
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
        const more = (await sources[i].list({ ...q, limit, cursor: page.next })) as ShardPage;
        pages[i] = {
          keys: [...page.keys, ...more.keys],
          updatedAt: [...page.updatedAt, ...more.updatedAt],
          rows: [...page.rows, ...more.rows],
          next: more.next,
        };
      }),
    );
    return mergeShardPages([...pages, old], limit);
  }

  async get(key: string): Promise<IndexedRow | null> {
    // Pre-sharding object first (see list). Typed through `unknown`: the stub's inferred RPC type of a row is too deep for the checker.
    const legacy = await this.ready();
    const old = legacy ? ((await legacy.get(key)) as unknown as IndexedRow | null) : null;
    return old ?? ((await this.rowShard(key).get(key)) as unknown as IndexedRow | null);
  }

  /** Keys whose sessionId is `id`: the locator's shard, or the pre-sharding object while it moves out. */
  async resolveSessionId(id: string, spawnedBy?: string): Promise<string[]> {
    const legacy = await this.ready();
    const old = legacy ? await legacy.resolveSessionId(id, spawnedBy) : [];
    return old.length > 0 ? old : this.idShard(id).lookupSessionId(id, spawnedBy);
  }

  /**
   * Labels have no locator (a label changes with every PATCH): a caller's children are found through
   * every shard's spawned_by index, any label through every shard's label index — N indexed lookups of
   * at most 5 rows each, newest first.
   */
  async resolveLabel(label: string, spawnedBy?: string): Promise<string[]> {
    const legacy = await this.ready();
    const found = await Promise.all(
      [...this.allShards(), ...(legacy ? [legacy] : [])].map((s) => s.resolveLabelRows(label, spawnedBy)),
    );
    const rows = found.flat().sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : -1));
    return [...new Set(rows.map((r) => r.key))].slice(0, 5);
  }

  /**
   * Write a session's row (the session object's coalesced sync), with the sessionId locator when this
   * object has not written it yet: a row is never resolvable by key but not by sessionId. A locator in the
   * row's shard (every new session's, src/registry/session-id.ts) is written in the same call; one in
   * another shard (sessions created before that) is written first.
   */
  async upsert(entry: IndexEntry, opts: { locatorWritten: boolean }): Promise<{ nextWriteInMs: number }> {
    await checkLayout(this.env, this.agentId, this.shards);
    const together = !opts.locatorWritten && shardOf(entry.sessionId, this.shards) === shardOf(entry.key, this.shards);
    if (!opts.locatorWritten && !together)
      await this.idShard(entry.sessionId).indexSessionId(entry.sessionId, entry.key, entry.spawnedBy);
    const paced = await this.rowShard(entry.key).upsert(entry, { withLocator: together });
    // A stale pre-sharding copy of this row would list twice (at its old position too): drop it.
    if (!drainedLegacy.has(this.agentId)) {
      const { drained } = await legacyIndexStub(this.env, this.agentId).forget(entry.key);
      if (drained) drainedLegacy.add(this.agentId);
    }
    return paced;
  }

  /** Many rows at once (seeding, bulk imports): one call per shard touched. */
  async upsertMany(entries: IndexEntry[]): Promise<void> {
    await checkLayout(this.env, this.agentId, this.shards);
    await copyToShards(this.env, this.shards, entries);
  }

  /** A deleted session: its row, its locator, and any pre-sharding copy. */
  async remove(key: string, sessionId: string | undefined): Promise<void> {
    await checkLayout(this.env, this.agentId, this.shards);
    await this.rowShard(key).remove(key);
    if (sessionId) await this.idShard(sessionId).forgetSessionId(sessionId);
    if (!drainedLegacy.has(this.agentId)) await legacyIndexStub(this.env, this.agentId).remove(key);
  }

  /** Rows over all shards (tests, bench). */
  async count(): Promise<number> {
    const counts = await Promise.all(this.allShards().map((s) => s.count()));
    return counts.reduce((a, b) => a + b, 0);
  }
}

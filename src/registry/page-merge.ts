import type { SessionRow } from "./row";
import type { ListPage, ShardPage } from "./shard-list";

/**
 * Merging shards' pages by position (updatedAt desc, key desc) into one page: the listing of an index over
 * several shards (src/registry/session-index.ts) and of several agents (src/tools/sessions-list.ts).
 */

/** Rows show `main` for the global bucket; its key (and cursor position) is `global`. */
export function canonicalKeyOfRow(row: SessionRow): string {
  return row.key === "main" ? "global" : row.key;
}

export type Position = { updatedAt: number; key: string };

/** Listing order: updatedAt desc, then key desc (the order of every shard's index). */
export function before(a: Position, b: Position): boolean {
  if (a.updatedAt !== b.updatedAt) return a.updatedAt > b.updatedAt;
  return a.key > b.key;
}

/** Sorted sources as the k-way merge reads them: a length and the position of each entry. */
export interface Sorted {
  length: number;
  at(i: number): Position;
  more: boolean;
  /** Where the source's next page starts (its cursor), when more follow. */
  next?: Position | null;
}

/**
 * K-way merge of sorted sources into at most `limit` picks ([source, index]). A key can sit in two sources
 * only while rows move (the pre-sharding object's, or a layout change's: src/registry/index-split.ts): the
 * first (newest) wins. More rows may
 * follow when entries were left over or any source said so; the cursor is the last pick's position, valid
 * for every shard.
 */
export function mergeSorted(
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

export const shardSource = (p: ShardPage): Sorted => ({
  length: p.keys.length,
  at: (i) => ({ updatedAt: p.updatedAt[i], key: p.keys[i] }),
  more: p.next !== null,
  next: p.next,
});

/** Merge of shard answers: picks by position, then parses only the picked rows. */
export function mergeShardPages(pages: ShardPage[], limit: number): ListPage {
  const { picks, next } = mergeSorted(pages.map(shardSource), limit);
  return { rows: picks.map(([s, i]) => JSON.parse(pages[s].rows[i]) as SessionRow), next };
}

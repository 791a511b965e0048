import { shardOf } from "./shard-hash";

/**
 * An agent's index layout as recorded in its shard 0 (src/registry/layout-record.ts) and cached by callers
 * (src/registry/index-layout.ts). `fixed`: `indexShards` set in the config (or recorded before the index
 * sized itself); `auto`: the self-sizing index (docs/scale.md). While rows move, `from` is the count they
 * move from and `shards` the count they move to; otherwise `from` is null. `epoch` grows with every change,
 * and a shard that gives rows away refuses callers with an older epoch (it is sealed).
 */
export interface Layout {
  epoch: number;
  mode: "fixed" | "auto";
  shards: number;
  from: number | null;
}

/**
 * Thresholds of the self-sizing index (`session.indexSplit`, docs/limits.md). A shard asks for a split when
 * its rows pass `rows` or its writes stay above `writesPerSecond` for `sustainMs`; the layout halves when
 * every shard has stayed under a quarter of both for `coolMs`.
 */
export interface SplitTuning {
  rows: number;
  writesPerSecond: number;
  sustainMs: number;
  coolMs: number;
  maxShards: number;
}

/** The shard objects a layout spans: both counts while rows move (a split's targets, a merge's sources). */
export function spanOf(l: Layout): number {
  return Math.max(l.shards, l.from ?? 0);
}

/** Where `value` (a key or a sessionId) lives once the current move is done. */
export function homeOf(l: Layout, value: string): number {
  return shardOf(value, l.shards);
}

/** Where `value` lived before the current move (its home when nothing moves). */
export function oldHomeOf(l: Layout, value: string): number {
  return l.from === null ? homeOf(l, value) : shardOf(value, l.from);
}

/**
 * Shards that give rows away in the current move (sealed, read first): a split's old shards (each keeps
 * the rows whose hash modulo the new count is its own number), a merge's upper half (everything goes).
 */
export function sourcesOf(l: Layout): number[] {
  if (l.from === null) return [];
  return l.from < l.shards
    ? Array.from({ length: l.from }, (_, n) => n)
    : Array.from({ length: l.from - l.shards }, (_, n) => l.shards + n);
}

/** Shards that only receive rows in the current move (read after the sources). */
export function targetsOf(l: Layout): number[] {
  const sources = new Set(sourcesOf(l));
  return Array.from({ length: spanOf(l) }, (_, n) => n).filter((n) => !sources.has(n));
}

/** True for 1, 2, 4 … : only such counts split into halves and merge back (hash mod 2N refines hash mod N). */
export function isPowerOfTwo(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0;
}

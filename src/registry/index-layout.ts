import { SwitchboardError } from "../errors";
import { STALE_LAYOUT } from "./index-split";
import { type Layout, spanOf } from "./layout-math";
import type { LayoutWant } from "./layout-record";
import { indexShardStub } from "./registry-stubs";

/**
 * The layout an agent's index was written with, recorded in its shard 0 (src/registry/layout-record.ts) and
 * cached here per isolate. Rows are placed by `hash mod count` (src/registry/shard-hash.ts), so an index that
 * holds rows under one count cannot be read or written under another.
 *
 * - `indexShards` set (the agent's own, else `session.indexShards`): a fixed count. A changed count is taken
 *   only while the index is empty, and refused with a config error otherwise (docs/scale.md,
 *   test/registry/index-shards.test.ts).
 * - unset: the index sizes itself (`auto`), starting at one object. An index recorded with a fixed count
 *   before (the old default was 16) keeps it: its rows are where that count put them.
 *
 * The cache is never trusted blindly: every call into a shard carries the cached epoch, and a shard that has
 * given rows away under a later layout refuses it (src/registry/index-split.ts); the caller then re-reads
 * the record (`refreshLayout`) and retries. A layout in the middle of a move is also re-read after
 * MOVING_TTL_MS, because the end of a move seals nothing and would otherwise go unnoticed (readers would keep
 * paying two rounds).
 */
const MOVING_TTL_MS = 1_000;

type Cached = { layout: Layout; want: string; readAt: number };
const cached = new Map<string, Cached>();
/** Refused `agentId:want` pairs: a refused count is not re-counted over every shard on each call. */
const refused = new Map<string, SwitchboardError>();

const wantKey = (w: LayoutWant) => (w.mode === "fixed" ? String(w.shards) : "auto");

/** The layout `agentId`'s index is read and written with, claiming one if the index is new. */
export async function layoutFor(env: Pick<Env, "REGISTRY">, agentId: string, want: LayoutWant): Promise<Layout> {
  const key = wantKey(want);
  const known = refused.get(`${agentId}:${key}`);
  if (known) throw known;
  const c = cached.get(agentId);
  if (c && c.want === key) {
    if (c.layout.from === null || Date.now() - c.readAt < MOVING_TTL_MS) return c.layout;
    return refreshLayout(env, agentId);
  }
  const first = indexShardStub(env, agentId, 0);
  let layout = await first.claimLayout(want, agentId);
  if (want.mode === "fixed" && (layout.mode !== "fixed" || layout.shards !== want.shards || layout.from !== null)) {
    // Same count, self-sizing recorded: the rows are placed as the fixed count places them; it only stops moving.
    const samePlaces = layout.shards === want.shards && layout.from === null;
    const counts = samePlaces
      ? [0]
      : await Promise.all(Array.from({ length: spanOf(layout) }, (_, n) => indexShardStub(env, agentId, n).count()));
    const rows = counts.reduce((a, b) => a + b, 0);
    const replaced = rows === 0 ? await first.replaceLayout(layout.epoch, want) : null;
    if (!replaced) {
      const error = new SwitchboardError(
        "config_error",
        `Agent "${agentId}": its session index holds ${rows} rows over ${layout.shards} shards, but the config says ${want.shards} ` +
          `(agents.entries.<id>.indexShards, else session.indexShards). Rows are placed by their key's hash modulo the count, ` +
          `so changing it would strand them: set it back to ${layout.shards} (docs/scale.md).`,
      );
      refused.set(`${agentId}:${key}`, error);
      throw error;
    }
    layout = replaced;
  }
  cached.set(agentId, { layout, want: key, readAt: Date.now() });
  return layout;
}

/** Re-read the record (after a shard refused the cached epoch, or a move's TTL ran out). */
export async function refreshLayout(env: Pick<Env, "REGISTRY">, agentId: string): Promise<Layout> {
  const layout = await indexShardStub(env, agentId, 0).readLayout();
  if (!layout) throw new Error(`index layout of "${agentId}" vanished`);
  noteLayout(agentId, layout);
  return layout;
}

/** A newer layout learnt from shard 0 (a split this caller started). */
export function noteLayout(agentId: string, layout: Layout): void {
  const c = cached.get(agentId);
  if (c && layout.epoch >= c.layout.epoch) cached.set(agentId, { layout, want: c.want, readAt: Date.now() });
}

/** The layout last seen for `agentId` in this isolate (bench and tests: which shards exist), if any. */
export function knownLayout(agentId: string): Layout | null {
  return cached.get(agentId)?.layout ?? null;
}

/** True for a shard's refusal of an older layout (the caller re-reads and retries). */
export function isStaleLayout(err: unknown): boolean {
  return String(err instanceof Error ? err.message : err).includes(STALE_LAYOUT);
}

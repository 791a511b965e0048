import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { vi } from "vitest";
import { RegistryObject } from "../../src/registry/registry-object";
import type { IndexEntry } from "../../src/registry/row";
import type { SessionIndex } from "../../src/registry/session-index";
import { shardName } from "../../src/registry/shard-hash";

/** Shard `n` of an agent's index. */
export const shardStub = (agentId: string, n: number) => env.REGISTRY.getByName(shardName(agentId, n));

export type RecordedLayout = { shards: number; from: number | null; epoch: number; mode: string };

/** The layout record in the agent's shard 0, as stored. */
export const recordedLayout = (agentId: string) =>
  runInDurableObject(shardStub(agentId, 0), (_o, s) =>
    s.storage.sql.exec<RecordedLayout>('SELECT shards, from_shards AS "from", epoch, mode FROM index_layout').one(),
  );

/** Rows and locators stored in one shard. */
export const stored = (agentId: string, n: number) =>
  runInDurableObject(shardStub(agentId, n), (_o, s) => ({
    keys: s.storage.sql
      .exec<{ key: string }>("SELECT key FROM sessions")
      .toArray()
      .map((r) => r.key),
    ids: s.storage.sql
      .exec<{ session_id: string }>("SELECT session_id FROM session_ids")
      .toArray()
      .map((r) => r.session_id),
  }));

/** Run the alarms of every shard the layout spans until no rows move (bounded; alarms also fire on their own). */
export async function settle(agentId: string): Promise<RecordedLayout> {
  for (let i = 0; i < 200; i++) {
    const l = await recordedLayout(agentId);
    if (l.from === null) return l;
    for (let n = 0; n < Math.max(l.shards, l.from); n++) await runDurableObjectAlarm(shardStub(agentId, n));
  }
  throw new Error(`the layout of ${agentId} never settled`);
}

/**
 * Hold a move's batches: the mover's copy into a target shard (RegistryObject.upsertMany) fails until the
 * test allows one more, so the move stays in the middle for as long as the test needs (the failed batch is
 * retried with backoff, src/registry/index-split.ts). `release()` lets every later batch through.
 */
export function holdBatches(agentId: string) {
  const original = RegistryObject.prototype.upsertMany;
  let allowed = 0;
  let all = false;
  const spy = vi.spyOn(RegistryObject.prototype, "upsertMany").mockImplementation(async function (
    this: RegistryObject,
    entries: IndexEntry[],
    epoch?: number,
  ) {
    // Only the mover's copies (no epoch) of this agent's rows are held.
    const mine = entries.some((e) => e.agentId === agentId) && epoch === undefined;
    if (mine && !all) {
      if (allowed <= 0) throw new Error("test: batch held");
      allowed--;
    }
    return original.call(this, entries, epoch);
  });
  return {
    /** Let exactly one more batch copy, and run shard `n`'s alarm (one batch). */
    async step(n = 0) {
      allowed++;
      await runDurableObjectAlarm(shardStub(agentId, n));
    },
    release() {
      all = true;
      spy.mockRestore();
    },
  };
}

/** Position order of the listing: updatedAt desc, then key desc. */
export function expectedOrder(model: Map<string, number>, after?: { updatedAt: number; key: string } | null): string[] {
  return [...model.entries()]
    .filter(([key, at]) => !after || at < after.updatedAt || (at === after.updatedAt && key < after.key))
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1))
    .map(([key]) => key);
}

/** Every key from `cursor` on, page by page (bounded). */
export async function walkIndex(
  index: SessionIndex,
  limit: number,
  cursor?: { updatedAt: number; key: string } | null,
): Promise<string[]> {
  const keys: string[] = [];
  let next = cursor ?? undefined;
  for (let i = 0; i < 1_000; i++) {
    const page = await index.list({ scope: { type: "agent" }, limit, ...(next ? { cursor: next } : {}) });
    keys.push(...page.rows.map((r) => r.key));
    if (!page.next) return keys;
    next = page.next;
  }
  throw new Error("walkIndex: too many pages");
}

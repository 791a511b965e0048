import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import type { RegistryObject } from "../../src/registry/registry-object";
import { sessionIndex } from "../../src/registry/session-index";
import { invoke } from "./http";
import { type SyntheticRow, syntheticIndexEntries } from "./index-rows";

/** A config with these agents (first = default, ids or whole entries) and extra top-level sections. */
export function configure(agents: (string | Record<string, unknown>)[], extra: Record<string, unknown> = {}) {
  const list = agents.map((a, i) => (typeof a === "string" ? { id: a, ...(i === 0 ? { default: true } : {}) } : a));
  setConfigOverride({ ...extra, agents: { ...(extra.agents as object), list } });
}

/** Index rows straight into an agent's registry shards (fast seeding of many sessions). */
export async function seed(agentId: string, rows: SyntheticRow[]) {
  await sessionIndex(env, loadConfig(env), agentId).upsertMany(syntheticIndexEntries(rows));
}

/** What a shard's call costs in rows: the rows SQLite read for it (SqlStorageCursor.rowsRead of each statement). */
export async function rowsRead<T>(
  shard: DurableObjectStub<RegistryObject>,
  call: (o: RegistryObject) => Promise<T>,
): Promise<{ rows: number; result: T }> {
  return runInDurableObject(shard, async (instance: RegistryObject, state) => {
    const proto = Object.getPrototypeOf(state.storage.sql);
    const exec = proto.exec;
    const cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];
    proto.exec = function (this: SqlStorage, ...args: Parameters<SqlStorage["exec"]>) {
      const cursor = exec.apply(this, args);
      cursors.push(cursor);
      return cursor;
    };
    try {
      const result = await call(instance);
      return { rows: cursors.reduce((sum, c) => sum + c.rowsRead, 0), result };
    } finally {
      proto.exec = exec;
    }
  });
}

/**
 * A listing walked while rows moved: no key twice, every row not updated meanwhile is there, and the order
 * is the list's (updatedAt descending, then key descending).
 */
export function expectListedOnceInOrder(
  seen: { key: string; updatedAt: number }[],
  all: { key: string }[],
  updated: Set<string>,
) {
  const keys = seen.map((s) => s.key);
  expect(new Set(keys).size).toBe(keys.length);
  for (const e of all) if (!updated.has(e.key)) expect(keys).toContain(e.key);
  for (let i = 1; i < seen.length; i++) {
    const [a, b] = [seen[i - 1], seen[i]];
    expect(a.updatedAt > b.updatedAt || (a.updatedAt === b.updatedAt && a.key > b.key)).toBe(true);
  }
}

export const keysOf = (r: { details: any }): string[] => r.details.sessions.map((s: any) => s.key as string);
export const list = (args: Record<string, unknown>, sessionKey: string) =>
  invoke("sessions_list", args, { sessionKey });

/** Follow nextCursor to the end; returns every key in order and the page sizes. */
export async function walk(args: Record<string, unknown>, sessionKey: string) {
  const keys: string[] = [];
  const sizes: number[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const r = await list({ ...args, ...(cursor ? { cursor } : {}) }, sessionKey);
    expect(r.status).toBe(200);
    keys.push(...keysOf(r));
    sizes.push(r.details.count);
    cursor = r.details.nextCursor;
    if (!cursor) return { keys, sizes };
  }
  throw new Error("cursor never ended");
}

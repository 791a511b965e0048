import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config/load";
import { refreshLayout } from "../../src/registry/index-layout";
import { RegistryObject } from "../../src/registry/registry-object";
import type { IndexEntry } from "../../src/registry/row";
import { newSessionId } from "../../src/registry/session-id";
import { sessionIndex } from "../../src/registry/session-index";
import { INDEX_SHARDS_MAX, shardOf } from "../../src/registry/shard-hash";
import { syntheticIndexEntries } from "../helpers/index-rows";
import {
  expectedOrder,
  holdBatches,
  recordedLayout,
  settle,
  shardStub,
  stored,
  walkIndex,
} from "../helpers/index-split";
import { configure, expectListedOnceInOrder, keysOf, list } from "../helpers/listing";
import { evict } from "../helpers/restart";

/** A self-sizing index (no indexShards) with small thresholds: a shard past `rows` rows asks to split. */
function autoConfig(agent: string, split: Record<string, number>) {
  configure([agent], {
    tools: { sessions: { visibility: "agent" } },
    session: { indexSplit: { sustainSeconds: 3600, writesPerSecond: 10_000, ...split } },
  });
}

const touched = (e: IndexEntry, updatedAt: number): IndexEntry => ({ ...e, updatedAt, row: { ...e.row, updatedAt } });

/** `count` rows of `agent`, one second apart, oldest last; `model` maps each key to its position. */
async function seeded(agent: string, count: number) {
  const t0 = Date.now() - 10_000_000;
  const entries = syntheticIndexEntries(
    Array.from({ length: count }, (_, i) => ({
      key: `agent:${agent}:s${String(i).padStart(4, "0")}`,
      updatedAt: t0 + i * 1000,
    })),
  );
  const index = sessionIndex(env, loadConfig(env), agent);
  await index.upsertMany(entries);
  const model = new Map(entries.map((e) => [e.key, e.updatedAt]));
  return { index, entries, model };
}

/** Every row and locator of a settled layout lives in the shard its hash names. */
async function expectPlaced(agent: string, shards: number, total: number) {
  let rows = 0;
  for (let n = 0; n < shards; n++) {
    const s = await stored(agent, n);
    rows += s.keys.length;
    for (const k of s.keys) expect(shardOf(k, shards)).toBe(n);
    for (const id of s.ids) expect(shardOf(id, shards)).toBe(n);
  }
  expect(rows).toBe(total);
}

afterEach(() => vi.restoreAllMocks());

/** The message of a refused call ("" if it was not refused). */
const refusal = (call: Promise<unknown>) =>
  Promise.resolve(call).then(
    () => "",
    (err: unknown) => String(err),
  );

describe("the self-sizing index", () => {
  it("a new agent starts at one object and lists from it in one call", async () => {
    autoConfig("one", { rows: 1000 });
    const { model } = await seeded("one", 30);
    expect(await recordedLayout("one")).toEqual({ shards: 1, from: null, epoch: 1, mode: "auto" });
    const lists = vi.spyOn(RegistryObject.prototype, "list");
    const page = await list({ limit: 10 }, "agent:one:s0000");
    expect(keysOf(page)).toEqual(expectedOrder(model).slice(0, 10));
    expect(lists).toHaveBeenCalledTimes(1);
    expect((await stored("one", 0)).keys).toHaveLength(30);
  });

  it("a split under concurrent writes and paging: every row once, in order; cursors from before and during it stay valid", async () => {
    // Past 1,500 rows a shard splits: the 2,500-row object does, its two halves of ~1,250 do not.
    autoConfig("sp", { rows: 1500 });
    const { index, entries, model } = await seeded("sp", 2500);
    const limit = 50;
    const first = await index.list({ scope: { type: "agent" }, limit });
    const before = first.next!;
    const seen: { key: string; updatedAt: number }[] = first.rows.map((r) => ({ key: r.key, updatedAt: r.updatedAt }));
    const hold = holdBatches("sp");
    // A write to the 2,500-row shard: it is past 1,500 rows, so the writer asks shard 0 to split.
    const now = Date.now();
    await index.upsert(touched(entries[599], now), { locatorWritten: true });
    model.set(entries[599].key, now);
    expect(await recordedLayout("sp")).toMatchObject({ shards: 2, from: 1, epoch: 2 });
    // Sealed: a writer still holding the one-object layout is refused by shard 0 and would re-read it.
    expect(await refusal(shardStub("sp", 0).upsert(touched(entries[10], now + 1), { epoch: 1 }))).toContain(
      "index layout moved",
    );
    const updated = new Set([entries[599].key]);
    let cursor = before;
    let during: { updatedAt: number; key: string } | null = null;
    let pagesWhileMoving = 0;
    for (let page = 0; page < 100; page++) {
      if ((await recordedLayout("sp")).from !== null) pagesWhileMoving++;
      const r = await index.list({ scope: { type: "agent" }, limit, cursor });
      seen.push(...r.rows.map((x) => ({ key: x.key, updatedAt: x.updatedAt })));
      if (page === 5) during = r.next;
      // Concurrent activity: two rows not reached yet and one already seen become the newest.
      const seenKeys = new Set(seen.map((s) => s.key));
      const ahead = entries.filter((e) => !updated.has(e.key) && !seenKeys.has(e.key)).slice(page % 7, (page % 7) + 2);
      const behind = entries.filter((e) => seenKeys.has(e.key) && !updated.has(e.key)).slice(0, 1);
      for (const [i, e] of [...ahead, ...behind].entries()) {
        const at = Date.now() + page * 10 + i;
        updated.add(e.key);
        model.set(e.key, at);
        await index.upsert(touched(e, at), { locatorWritten: true });
      }
      if (page % 8 === 0) await hold.step(0); // a batch scans 1,000 rows: three batches over the walk
      if (!r.next) break;
      cursor = r.next;
    }
    expect(pagesWhileMoving).toBeGreaterThan(5);
    hold.release();
    expect(await settle("sp")).toMatchObject({ shards: 2, from: null, epoch: 3 });
    expectListedOnceInOrder(seen, entries, updated);
    // The cursor from before the split and one from the middle of it select exactly the rows after them.
    expect(await walkIndex(index, 40, before)).toEqual(expectedOrder(model, before));
    expect(await walkIndex(index, 40, during)).toEqual(expectedOrder(model, during));
    expect(await walkIndex(index, 40)).toEqual(expectedOrder(model));
    await expectPlaced("sp", 2, 2500);
    expect((await stored("sp", 1)).keys.length).toBeGreaterThan(1000);
  });

  it("shards evicted in the middle of a split: the move resumes from its rows; lists and sessionIds stay right throughout", async () => {
    autoConfig("ev", { rows: 2000 });
    const { index, entries, model } = await seeded("ev", 2500);
    const hold = holdBatches("ev");
    const fresh = syntheticIndexEntries([{ key: "agent:ev:fresh", updatedAt: Date.now() }])[0];
    await index.upsert(fresh, { locatorWritten: false });
    model.set(fresh.key, fresh.updatedAt);
    expect(await recordedLayout("ev")).toMatchObject({ shards: 2, from: 1 });
    await hold.step(0); // one batch moved (1,000 rows and 1,000 locators scanned), the next one is held
    // A row not moved yet is written during the move: it goes to its new shard, its old copy goes away.
    // The oldest such row, so that its old position and its new one fall on different pages.
    const waiting = new Set((await stored("ev", 0)).keys);
    const late = entries.find((e) => waiting.has(e.key) && shardOf(e.key, 2) === 1)!;
    const lateAt = Date.now();
    await index.upsert(touched(late, lateAt), { locatorWritten: true });
    model.set(late.key, lateAt);
    await evict(shardStub("ev", 0), shardStub("ev", 1));
    expect(await recordedLayout("ev")).toMatchObject({ shards: 2, from: 1 });
    expect((await stored("ev", 1)).keys.length).toBeGreaterThan(0);
    expect(await walkIndex(index, 60)).toEqual(expectedOrder(model));
    // sessionIds resolve during the move, whether their locator moved already, waits to move, or is new.
    const sample = [...entries.filter((_, i) => i % 100 === 0), fresh];
    for (const e of sample) expect(await index.resolveSessionId(e.sessionId)).toEqual([e.key]);
    for (const e of sample) expect((await index.get(e.key))?.key).toBe(e.key);
    hold.release();
    await evict(shardStub("ev", 0), shardStub("ev", 1));
    expect(await settle("ev")).toMatchObject({ shards: 2, from: null });
    await expectPlaced("ev", 2, 2501);
    expect(await walkIndex(index, 60)).toEqual(expectedOrder(model));
    // Settled: a sessionId is one lookup in one shard again, once this isolate has re-read the layout (a
    // moving layout is re-read after a second, src/registry/index-layout.ts: the time is moved by hand).
    await refreshLayout(env, "ev");
    const lookups = vi.spyOn(RegistryObject.prototype, "lookupSessionId");
    for (const e of sample) expect(await index.resolveSessionId(e.sessionId)).toEqual([e.key]);
    expect(lookups).toHaveBeenCalledTimes(sample.length);
  });

  it("merges back when every shard has cooled: rows move down, cursors stay valid, the upper shard is sealed and empty", async () => {
    autoConfig("mg", { rows: 40, coolSeconds: 0 });
    const { index, entries, model } = await seeded("mg", 100);
    await index.upsert(touched(entries[0], entries[0].updatedAt), { locatorWritten: true });
    const split = await settle("mg");
    expect(split).toMatchObject({ shards: 2, from: null });
    // Cool it: keep 6 rows per shard (under a quarter of 40), delete the rest.
    const kept = [0, 1].flatMap((n) => entries.filter((e) => shardOf(e.key, 2) === n).slice(0, 6));
    for (const e of entries)
      if (!kept.includes(e)) {
        await index.remove(e.key, e.sessionId);
        model.delete(e.key);
      }
    const page = await index.list({ scope: { type: "agent" }, limit: 5 });
    const cursor = page.next!;
    // The check period has passed (time moved by hand): shard 0's alarm measures every shard and merges.
    await runInDurableObject(shardStub("mg", 0), (_o, s) =>
      s.storage.sql.exec("UPDATE index_layout SET next_check = 0"),
    );
    const hold = holdBatches("mg");
    await hold.step(0);
    expect(await recordedLayout("mg")).toMatchObject({ shards: 1, from: 2, epoch: split.epoch + 1 });
    expect(await walkIndex(index, 4)).toEqual(expectedOrder(model));
    expect(await refusal(shardStub("mg", 1).upsert(touched(kept[0], Date.now()), { epoch: split.epoch }))).toContain(
      "index layout moved",
    );
    hold.release();
    expect(await settle("mg")).toMatchObject({ shards: 1, from: null, epoch: split.epoch + 2 });
    expect(await stored("mg", 1)).toEqual({ keys: [], ids: [] });
    await expectPlaced("mg", 1, 12);
    expect(await walkIndex(index, 4, cursor)).toEqual(expectedOrder(model, cursor));
    for (const e of kept) expect(await index.resolveSessionId(e.sessionId)).toEqual([e.key]);
    await refreshLayout(env, "mg"); // a second has passed: this isolate re-reads the settled layout
    const lists = vi.spyOn(RegistryObject.prototype, "list");
    await index.list({ scope: { type: "agent" }, limit: 50 });
    expect(lists).toHaveBeenCalledTimes(1);
  });

  it("a session deleted while its batch is in flight does not come back in its new shard", async () => {
    autoConfig("rc", { rows: 30 });
    const { index, entries, model } = await seeded("rc", 40);
    const victim = entries.find((e) => shardOf(e.key, 2) === 1 && shardOf(e.sessionId, 2) === 1)!;
    const original = RegistryObject.prototype.upsertMany;
    let raced = false;
    vi.spyOn(RegistryObject.prototype, "upsertMany").mockImplementation(async function (
      this: RegistryObject,
      batch: IndexEntry[],
      epoch?: number,
    ) {
      // The mover's copy (no epoch) is in flight when the session is deleted: the deletion lands first.
      if (!raced && epoch === undefined && batch.some((e) => e.key === victim.key)) {
        raced = true;
        await index.remove(victim.key, victim.sessionId);
        model.delete(victim.key);
      }
      return original.call(this, batch, epoch);
    });
    await index.upsert(touched(entries[0], entries[0].updatedAt), { locatorWritten: true });
    await settle("rc");
    expect(raced).toBe(true);
    expect(await index.get(victim.key)).toBeNull();
    expect(await index.resolveSessionId(victim.sessionId)).toEqual([]);
    expect((await stored("rc", 1)).keys).not.toContain(victim.key);
    expect((await stored("rc", 1)).ids).not.toContain(victim.sessionId);
    expect(await walkIndex(index, 50)).toEqual(expectedOrder(model));
  });

  it("a sustained write rate past the threshold splits too", async () => {
    autoConfig("hot", { rows: 1_000_000, writesPerSecond: 3, sustainSeconds: 0 });
    const { index, entries } = await seeded("hot", 10);
    for (const e of entries.slice(0, 6)) await index.upsert(touched(e, Date.now()), { locatorWritten: true });
    expect((await recordedLayout("hot")).shards).toBe(2);
  });

  it("a new sessionId shares its key's shard at every count a self-sizing index reaches, and stays a v4 UUID", () => {
    for (let i = 0; i < 50; i++) {
      const key = `agent:ids:k${i}`;
      const id = newSessionId(key, INDEX_SHARDS_MAX);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      for (let n = 1; n <= INDEX_SHARDS_MAX; n *= 2) expect(shardOf(id, n)).toBe(shardOf(key, n));
    }
  });

  it("indexShards stays a fixed override, and an index recorded at the old default of 16 keeps 16 when it is unset", async () => {
    configure(["fx"], {
      tools: { sessions: { visibility: "agent" } },
      session: { indexShards: 16, indexSplit: { rows: 5 } },
    });
    const { index, entries, model } = await seeded("fx", 40);
    await index.upsert(touched(entries[0], Date.now()), { locatorWritten: true });
    model.set(entries[0].key, Date.now());
    expect(await recordedLayout("fx")).toEqual({ shards: 16, from: null, epoch: 1, mode: "fixed" });
    autoConfig("fx", { rows: 5 });
    const unset = sessionIndex(env, loadConfig(env), "fx");
    await unset.upsert(touched(entries[1], Date.now()), { locatorWritten: true });
    expect(await recordedLayout("fx")).toEqual({ shards: 16, from: null, epoch: 1, mode: "fixed" });
    expect(await unset.count()).toBe(40);
    expect((await walkIndex(unset, 50)).sort()).toEqual([...model.keys()].sort());
  });
});

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { RegistryObject } from "../../src/registry/registry-object";
import type { IndexEntry } from "../../src/registry/row";
import { shardName, shardOf } from "../../src/registry/shard-hash";
import { call, enc, flushIndex, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { syntheticIndexEntries } from "../helpers/index-rows";
import { configure, keysOf } from "../helpers/listing";
import { evict } from "../helpers/restart";

/** Index writes are paced per shard (src/registry/write-pacing.ts) and a send never waits for its routine index write. */

const entries = syntheticIndexEntries;

describe("index write pacing", () => {
  it("a shard under a burst tells its writers to space their routine writes out (target 200 writes/s), and a quiet one does not", async () => {
    configure(["pace"], { session: { indexShards: 8 } });
    const [one] = entries([{ key: "agent:pace:x", updatedAt: Date.now() }]);
    const shard = env.REGISTRY.getByName(shardName("pace", 0));
    const quiet = await env.REGISTRY.getByName(shardName("pace", 1)).upsert(one);
    expect(quiet).toEqual({ nextWriteInMs: 1000 });
    const intervals = await runInDurableObject(shard, async (obj: RegistryObject) => {
      const out: number[] = [];
      for (let i = 0; i < 1000; i++)
        out.push((await obj.upsert({ ...one, updatedAt: one.updatedAt + i })).nextWriteInMs);
      return out;
    });
    expect(intervals[199]).toBe(1000);
    expect(intervals[599]).toBe(3000);
    expect(intervals[999]).toBe(5000);
    // Bounded: however busy, a row lags its session by at most 30 s.
    const more = await runInDurableObject(shard, async (obj: RegistryObject) => {
      let last = 0;
      for (let i = 0; i < 10_000; i++) last = (await obj.upsert(one)).nextWriteInMs;
      return last;
    });
    expect(more).toBe(30_000);
  });

  it("a session keeps the interval its row's shard asked for; a new session is still listed at once", async () => {
    configure(["pace2"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const key = "agent:pace2:busy";
    const shard = env.REGISTRY.getByName(shardName("pace2", shardOf(key, 8)));
    const [filler] = entries([{ key: "agent:pace2:filler", updatedAt: 1 }]);
    await runInDurableObject(shard, async (obj: RegistryObject) => {
      for (let i = 0; i < 1000; i++) await obj.upsert(filler);
    });
    await sendAndWait(key, "hello");
    // Listed at once although its shard is busy.
    expect(keysOf(await invoke("sessions_list", { limit: 5 }, { sessionKey: "agent:pace2:main" }))).toContain(key);
    const session = sessionStub(key);
    const due: number = await runInDurableObject(
      session,
      async (obj: { markIndexDirty(): Promise<void> }, state: DurableObjectState) => {
        await obj.markIndexDirty();
        return (
          (state.storage.sql.exec("SELECT due_at FROM timers WHERE kind = 'index'").one().due_at as number) - Date.now()
        );
      },
    );
    expect(due).toBeGreaterThan(3000);
    expect(due).toBeLessThanOrEqual(5000);
  });

  it("a session going idle on a busy shard is listed with its paced write (within the interval), on a quiet shard at once", async () => {
    configure(["idle"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    const listed = async (key: string) =>
      (await invoke("sessions_list", { limit: 5 }, { sessionKey: "agent:idle:main" })).details.sessions.find(
        (r: any) => r.key === key,
      );
    const indexDueIn = (key: string) =>
      runInDurableObject(sessionStub(key), (_o, s) => {
        const row = s.storage.sql
          .exec<{ due_at: number }>("SELECT due_at FROM timers WHERE kind = 'index'")
          .toArray()[0];
        return row ? row.due_at - Date.now() : null;
      });
    // Quiet shard (it answers the minimum interval): the run's end is listed when the wait returns.
    const quiet = "agent:idle:quiet";
    await sendAndWait(quiet, "hello");
    const quietMeta = (await call("GET", `/v1/sessions/${enc(quiet)}`)).json;
    expect(quietMeta.totalTokens).toBeGreaterThan(0);
    expect((await listed(quiet)).totalTokens).toBe(quietMeta.totalTokens);
    expect(await indexDueIn(quiet)).toBeNull();
    // Busy shard: every write is answered with a 5 s interval, as under a burst (test above).
    const original = RegistryObject.prototype.upsert;
    vi.spyOn(RegistryObject.prototype, "upsert").mockImplementation(async function (
      this: RegistryObject,
      e: IndexEntry,
    ) {
      await original.call(this, e);
      return { nextWriteInMs: 5_000 };
    });
    const busy = "agent:idle:busy";
    await sendAndWait(busy, "hello");
    const busyMeta = (await call("GET", `/v1/sessions/${enc(busy)}`)).json;
    // Listed at once as a new session, but the run's end waits for the paced write.
    expect((await listed(busy)).totalTokens).toBe(0);
    const due = await indexDueIn(busy);
    expect(due).toBeGreaterThan(0);
    expect(due).toBeLessThanOrEqual(5_000);
    await flushIndex(busy);
    const row = await listed(busy);
    expect([row.totalTokens, row.updatedAt]).toEqual([busyMeta.totalTokens, busyMeta.updatedAt]);
  });

  it("a message into a known session is answered without waiting for its index write, which the index timer still makes", async () => {
    configure(["offpath"], { tools: { sessions: { visibility: "agent" } } });
    const key = "agent:offpath:chat";
    await sendAndWait(key, "first");
    // A fresh instance (no write in its memory): the next message is a leading-edge write.
    await evict(sessionStub(key));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const original = RegistryObject.prototype.upsert;
    const upsert = vi.spyOn(RegistryObject.prototype, "upsert").mockImplementation(async function (
      this: RegistryObject,
      e: IndexEntry,
    ) {
      await gate;
      return original.call(this, e);
    });
    const posted = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "second" });
    expect(posted.status).toBe(202);
    expect(upsert.mock.calls.filter(([e]) => e.key === key).length).toBeLessThanOrEqual(1);
    release();
    await call("GET", `/v1/runs/${posted.json.runId}/wait?timeoutMs=10000`);
    await flushIndex(key);
    const row = (
      await invoke("sessions_list", { limit: 5 }, { sessionKey: "agent:offpath:main" })
    ).details.sessions.find((r: any) => r.key === key);
    const meta = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(row.updatedAt).toBe(meta.updatedAt);
  });
});

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import { RegistryObject } from "../../src/registry/registry-object";
import type { IndexEntry } from "../../src/registry/row";
import { sessionIndex } from "../../src/registry/session-index";
import { legacyName, shardName, shardOf } from "../../src/registry/shard-hash";
import { call, enc, invoke, sendAndWait } from "../helpers/http";
import { syntheticIndexEntries } from "../helpers/index-rows";
import { configure, expectListedOnceInOrder, keysOf } from "../helpers/listing";

const entries = syntheticIndexEntries;

const shardRows = (agentId: string, n: number) =>
  runInDurableObject(
    env.REGISTRY.getByName(shardName(agentId, n)),
    (_o, s) => s.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sessions").one().n,
  );

describe("session index shards", () => {
  it("rows spread over session.indexShards objects by their key's hash; a listing merges them newest first", async () => {
    configure(["spread"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const t0 = Date.now() - 100_000;
    const seeded = entries(Array.from({ length: 120 }, (_, i) => ({ key: `agent:spread:s${i}`, updatedAt: t0 + i })));
    await sessionIndex(env, loadConfig(env), "spread").upsertMany(seeded);
    const counts = await Promise.all(Array.from({ length: 8 }, (_, n) => shardRows("spread", n)));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(120);
    for (let n = 0; n < 8; n++) expect(counts[n]).toBe(seeded.filter((e) => shardOf(e.key, 8) === n).length);
    expect(counts.filter((c) => c > 0).length).toBe(8);
    const page = await invoke("sessions_list", { limit: 10 }, { sessionKey: "agent:spread:s0" });
    expect(keysOf(page)).toEqual(Array.from({ length: 10 }, (_, i) => `agent:spread:s${119 - i}`));
  });

  it("a page whose rows crowd into one shard is still the exact newest page (shards asked for a share, then for more)", async () => {
    configure(["skew"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const t0 = Date.now() - 100_000;
    const inShard0: string[] = [];
    const elsewhere: string[] = [];
    for (let i = 0; inShard0.length < 40 || elsewhere.length < 40; i++) {
      const key = `agent:skew:k${i}`;
      (shardOf(key, 8) === 0 ? inShard0 : elsewhere).push(key);
    }
    // The 40 newest rows all live in shard 0; 40 older ones elsewhere.
    const rows = [
      ...elsewhere.slice(0, 40).map((key, i) => ({ key, updatedAt: t0 + i })),
      ...inShard0.slice(0, 40).map((key, i) => ({ key, updatedAt: t0 + 1000 + i })),
    ];
    await sessionIndex(env, loadConfig(env), "skew").upsertMany(entries(rows));
    const expected = [...rows].sort((a, b) => b.updatedAt - a.updatedAt).map((r) => r.key);
    const first = await invoke("sessions_list", { limit: 30 }, { sessionKey: "agent:skew:main" });
    expect(keysOf(first)).toEqual(expected.slice(0, 30));
    const second = await invoke(
      "sessions_list",
      { limit: 30, cursor: first.details.nextCursor },
      { sessionKey: "agent:skew:main" },
    );
    expect(keysOf(second)).toEqual(expected.slice(30, 60));
  });

  it("session.indexShards is bounded (1–256) and named in the error", async () => {
    setConfigOverride({ session: { indexShards: 0 }, agents: { list: [{ id: "main", default: true }] } });
    const r = await call("GET", "/v1/sessions");
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(r.json)).toContain("indexShards");
  });

  it("cursor paging across shards reaches every row not updated meanwhile exactly once, in order, while other rows are updated", async () => {
    configure(["pg"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const index = sessionIndex(env, loadConfig(env), "pg");
    const t0 = Date.now() - 100_000;
    // Ties on updatedAt on purpose (groups of 3): the cursor orders them by key across shards.
    const rows = Array.from({ length: 150 }, (_, i) => ({
      key: `agent:pg:s${String(i).padStart(3, "0")}`,
      updatedAt: t0 + Math.floor(i / 3),
    }));
    await index.upsertMany(entries(rows));
    const seen: { key: string; updatedAt: number }[] = [];
    const updated = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const r = await invoke(
        "sessions_list",
        { limit: 7, ...(cursor ? { cursor } : {}) },
        { sessionKey: "agent:pg:s000" },
      );
      expect(r.details.count).toBeLessThanOrEqual(7);
      seen.push(...r.details.sessions.map((s: any) => ({ key: s.key, updatedAt: s.updatedAt })));
      // Concurrent activity: two rows not yet reached and one already seen become the newest.
      const ahead = rows
        .filter((x) => !updated.has(x.key) && !seen.some((s) => s.key === x.key))
        .slice((page * 5) % 40, ((page * 5) % 40) + 2);
      const behind = seen.filter((s) => !updated.has(s.key)).slice(0, 1);
      for (const x of [...ahead, ...behind]) updated.add(x.key);
      await index.upsertMany(
        entries([...ahead, ...behind].map((x, i) => ({ key: x.key, updatedAt: Date.now() + page * 10 + i }))),
      );
      cursor = r.details.nextCursor;
      if (!cursor) break;
    }
    expect(cursor).toBeUndefined();
    expectListedOnceInOrder(seen, rows, updated);
    expect(updated.size).toBeGreaterThan(10);
  });

  it("tree visibility across shards: the caller's own row and its children only, in pages, whichever shard each lives in", async () => {
    configure(["tr"], { session: { indexShards: 8 } });
    const me = "agent:tr:main";
    const t = Date.now() - 100_000;
    const children = Array.from({ length: 12 }, (_, i) => ({
      key: `agent:tr:subagent:c${i}`,
      updatedAt: t + 100 + i,
      spawnedBy: me,
    }));
    const others = Array.from({ length: 40 }, (_, i) => ({ key: `agent:tr:x${i}`, updatedAt: t + 1000 + i }));
    await sessionIndex(env, loadConfig(env), "tr").upsertMany(
      entries([{ key: me, updatedAt: t }, ...children, ...others]),
    );
    expect(new Set(children.map((c) => shardOf(c.key, 8))).size).toBeGreaterThan(2);
    const keys: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await invoke("sessions_list", { limit: 5, ...(cursor ? { cursor } : {}) }, { sessionKey: me });
      expect(r.details.visibility).toBe("tree");
      keys.push(...keysOf(r));
      cursor = r.details.nextCursor;
    } while (cursor);
    expect(keys).toEqual([...children.map((c) => c.key).reverse(), me]);
  });

  it("a sessionId resolves with one lookup in one shard", async () => {
    configure(["rid"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const key = "agent:rid:by-id";
    await sendAndWait(key, "find me");
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    const lookups = vi.spyOn(RegistryObject.prototype, "lookupSessionId");
    const r = await invoke("sessions_history", { sessionKey: sessionId }, { sessionKey: "agent:rid:main" });
    expect(r.details.sessionKey).toBe(key);
    expect(lookups).toHaveBeenCalledTimes(1);
    const row = await runInDurableObject(env.REGISTRY.getByName(shardName("rid", shardOf(sessionId, 8))), (_o, s) =>
      s.storage.sql.exec("SELECT key FROM session_ids WHERE session_id = ?", sessionId).toArray(),
    );
    expect(row).toEqual([{ key }]);
  });

  it("deleting a session removes its row and its sessionId locator", async () => {
    configure(["del"], { session: { indexShards: 8 } });
    const key = "agent:del:gone";
    await sendAndWait(key, "soon gone");
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(200);
    expect(await sessionIndex(env, loadConfig(env), "del").get(key)).toBeNull();
    expect(await sessionIndex(env, loadConfig(env), "del").resolveSessionId(sessionId)).toEqual([]);
  });
});

describe("per-agent shard counts (agents.list[].indexShards)", () => {
  it("an agent's own indexShards places its rows; another agent keeps session.indexShards", async () => {
    setConfigOverride({
      tools: { sessions: { visibility: "agent" } },
      session: { indexShards: 8 },
      agents: { list: [{ id: "tiny", default: true, indexShards: 1 }, { id: "wide" }] },
    });
    const t0 = Date.now() - 100_000;
    const rows = (agent: string) =>
      Array.from({ length: 40 }, (_, i) => ({ key: `agent:${agent}:s${i}`, updatedAt: t0 + i }));
    await sessionIndex(env, loadConfig(env), "tiny").upsertMany(entries(rows("tiny")));
    await sessionIndex(env, loadConfig(env), "wide").upsertMany(entries(rows("wide")));
    expect(await shardRows("tiny", 0)).toBe(40);
    expect(await Promise.all(Array.from({ length: 7 }, (_, n) => shardRows("tiny", n + 1)))).toEqual([
      0, 0, 0, 0, 0, 0, 0,
    ]);
    const wide = await Promise.all(Array.from({ length: 8 }, (_, n) => shardRows("wide", n)));
    expect(wide.filter((c) => c > 0).length).toBe(8);
    const page = await invoke("sessions_list", { limit: 5 }, { sessionKey: "agent:tiny:s0" });
    expect(keysOf(page)).toEqual([
      "agent:tiny:s39",
      "agent:tiny:s38",
      "agent:tiny:s37",
      "agent:tiny:s36",
      "agent:tiny:s35",
    ]);
  });

  it("a changed count for an agent with rows is refused with a config error naming both counts; its rows stay as they were", async () => {
    configure(["moved"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    const t0 = Date.now() - 100_000;
    await sessionIndex(env, loadConfig(env), "moved").upsertMany(
      entries(Array.from({ length: 12 }, (_, i) => ({ key: `agent:moved:s${i}`, updatedAt: t0 + i }))),
    );
    configure(["moved"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 8 } });
    const refused = await invoke("sessions_list", { limit: 50 }, { sessionKey: "agent:moved:s0" });
    expect(refused.status).toBe(500);
    expect(refused.body.error.type).toBe("config_error");
    expect(refused.body.error.message).toBe(
      'Agent "moved": its session index holds 12 rows over 4 shards, but the config says 8 (agents.entries.<id>.indexShards, else session.indexShards). ' +
        "Rows are placed by their key's hash modulo the count, so changing it would strand them: set it back to 4 (docs/scale.md).",
    );
    // A write under the new count is refused too: nothing lands in a shard where no reader looks for it.
    // The refusal is remembered: the shards are not counted again on every call.
    const counted = vi.spyOn(RegistryObject.prototype, "count");
    const [late] = entries([{ key: "agent:moved:late", updatedAt: Date.now() }]);
    await expect(sessionIndex(env, loadConfig(env), "moved").upsert(late, { locatorWritten: false })).rejects.toThrow(
      "set it back to 4",
    );
    expect(counted).not.toHaveBeenCalled();
    expect(await Promise.all([4, 5, 6, 7].map((n) => shardRows("moved", n)))).toEqual([0, 0, 0, 0]);
    configure(["moved"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    expect((await invoke("sessions_list", { limit: 50 }, { sessionKey: "agent:moved:s0" })).details.count).toBe(12);
  });

  it("an agent whose index is still empty takes a changed count", async () => {
    configure(["young"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    expect((await invoke("sessions_list", {}, { sessionKey: "agent:young:main" })).details.count).toBe(0);
    configure(["young"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 2 } });
    await sendAndWait("agent:young:chat", "hello");
    const listed = await invoke("sessions_list", {}, { sessionKey: "agent:young:main" });
    expect(keysOf(listed)).toEqual(["agent:young:chat"]);
    const recorded = await runInDurableObject(
      env.REGISTRY.getByName(shardName("young", 0)),
      (_o, s) => s.storage.sql.exec<{ shards: number }>("SELECT shards FROM index_layout").one().shards,
    );
    expect(recorded).toBe(2);
  });

  it("agents.list[].indexShards is bounded (1–256) and named in the error", async () => {
    setConfigOverride({ agents: { list: [{ id: "main", default: true, indexShards: 300 }] } });
    const r = await call("GET", "/v1/sessions");
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(r.json)).toContain("indexShards");
  });
});

describe("migration from the one-object index (registry:<agentId>)", () => {
  it("old rows are listed and resolved after the upgrade, move to their shards by alarm, and stay listed exactly once", async () => {
    configure(["old"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    const t0 = Date.now() - 100_000;
    const old = entries(
      Array.from({ length: 450 }, (_, i) => ({ key: `agent:old:s${String(i).padStart(3, "0")}`, updatedAt: t0 + i })),
    );
    const legacy = env.REGISTRY.getByName(legacyName("old"));
    await legacy.upsertMany(old);
    const listAll = async () => {
      const keys: string[] = [];
      let cursor: string | undefined;
      do {
        const r = await invoke(
          "sessions_list",
          { limit: 200, ...(cursor ? { cursor } : {}) },
          { sessionKey: "agent:old:s000" },
        );
        keys.push(...keysOf(r));
        cursor = r.details.nextCursor;
      } while (cursor);
      return keys;
    };
    const expected = old.map((e) => e.key).reverse();
    // Before any row has moved: listed (the first read starts the move) and resolvable by sessionId.
    expect(await listAll()).toEqual(expected);
    const index = sessionIndex(env, loadConfig(env), "old");
    expect(await index.resolveSessionId(old[7].sessionId)).toEqual([old[7].key]);
    // A session active since the upgrade wrote a newer row to its shard; its old copy must not list twice.
    const now = Date.now(); // one clock read: the entry and its row must carry the same updatedAt
    const fresh = { ...old[3], updatedAt: now, row: { ...old[3].row, updatedAt: now } };
    await index.upsert(fresh, { locatorWritten: false });
    expect((await listAll())[0]).toBe(old[3].key);
    expect((await listAll()).filter((k) => k === old[3].key)).toHaveLength(1);
    // A session deleted while its batch is in flight: recorded, and its moved copy removed afterwards.
    await index.remove(old[5].key, old[5].sessionId);
    // Run the move to the end (200 rows per batch; bounded loop).
    // Alarms also fire on their own here; drive them until the move has ended (bounded).
    const moveState = () =>
      runInDurableObject(
        legacy,
        (_o, s) => s.storage.sql.exec("SELECT COUNT(*) AS n FROM move_state").one().n as number,
      );
    for (let i = 0; i < 50 && (await moveState()) > 0; i++) await runDurableObjectAlarm(legacy);
    expect(await moveState()).toBe(0);
    expect(await legacy.count()).toBe(0);
    expect(await index.count()).toBe(449);
    const after = await listAll();
    expect(after).toEqual([old[3].key, ...expected.filter((k) => k !== old[3].key && k !== old[5].key)]);
    expect(await index.resolveSessionId(old[7].sessionId)).toEqual([old[7].key]);
    expect(await index.resolveSessionId(old[5].sessionId)).toEqual([]);
    // The moved row of the fresh session kept its newer version.
    expect((await index.get(old[3].key))!.row.updatedAt).toBe(fresh.updatedAt);
  });

  it("a delete that races a batch in flight does not leave the moved copy behind", async () => {
    configure(["race"], { tools: { sessions: { visibility: "agent" } }, session: { indexShards: 4 } });
    const old = entries(
      Array.from({ length: 3 }, (_, i) => ({ key: `agent:race:s${i}`, updatedAt: Date.now() - 1000 + i })),
    );
    const legacy = env.REGISTRY.getByName(legacyName("race"));
    await legacy.upsertMany(old);
    const index = sessionIndex(env, loadConfig(env), "race");
    // The batch's copy is in flight when the session is deleted: the deletion lands first, the copy after it.
    const original = RegistryObject.prototype.upsertMany;
    let raced = false;
    const trace: unknown[] = [];
    vi.spyOn(RegistryObject.prototype, "upsertMany").mockImplementation(async function (
      this: RegistryObject,
      batch: IndexEntry[],
    ) {
      if (!raced && batch.some((e) => e.key === old[1].key)) {
        raced = true;
        await index.remove(old[1].key, old[1].sessionId);
        trace.push(["removed", Date.now()]);
      }
      trace.push(["copy", batch.map((e) => [e.key, e.updatedAt])]);
      return original.call(this, batch);
    });
    await legacy.moveOut("race", 4);
    // Alarms also fire on their own here; drive them until the move has ended (bounded).
    const moveState = () =>
      runInDurableObject(
        legacy,
        (_o, s) => s.storage.sql.exec("SELECT COUNT(*) AS n FROM move_state").one().n as number,
      );
    for (let i = 0; i < 50 && (await moveState()) > 0; i++) await runDurableObjectAlarm(legacy);
    expect(await moveState()).toBe(0);
    expect(raced).toBe(true);
    expect(await legacy.count()).toBe(0);
    expect(await index.get(old[1].key), JSON.stringify(trace)).toBeNull();
    expect(
      await runInDurableObject(legacy, (_o, s) => s.storage.sql.exec("SELECT COUNT(*) AS n FROM move_removed").one().n),
    ).toBe(0);
    expect(await index.resolveSessionId(old[1].sessionId)).toEqual([]);
    expect((await index.get(old[0].key))?.key).toBe(old[0].key);
  });
});

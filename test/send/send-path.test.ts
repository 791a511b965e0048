import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { RegistryObject } from "../../src/registry/registry-object";
import type { IndexEntry } from "../../src/registry/row";
import { SessionIndex } from "../../src/registry/session-index";
import { shardName, shardOf } from "../../src/registry/shard-hash";
import type { SessionObject } from "../../src/session/session-object";
import { call, enc, invoke, sessionStub } from "../helpers/http";
import { syntheticIndexEntries } from "../helpers/index-rows";
import { quiesce } from "../helpers/quiesce";
import { baseConfig, deferred, installFakes } from "../helpers/scripted";

/** What a send's caller waits for (docs/scale.md, "Where a send's time goes"). */

const SHARDS = 16;

function configure(agentId: string) {
  setConfigOverride(
    baseConfig({
      session: { indexShards: SHARDS },
      tools: { sessions: { visibility: "agent" } },
      agents: { list: [{ id: agentId, default: true }] },
    }),
  );
}

/** Every registry write as it arrives: which method, which session, in order. */
function recordRegistryWrites() {
  const writes: { method: "upsert" | "indexSessionId"; key: string; withLocator?: boolean }[] = [];
  const upsert = RegistryObject.prototype.upsert;
  vi.spyOn(RegistryObject.prototype, "upsert").mockImplementation(function (
    this: RegistryObject,
    e: IndexEntry,
    opts?: { withLocator?: boolean },
  ) {
    writes.push({ method: "upsert", key: e.key, withLocator: opts?.withLocator === true });
    return upsert.call(this, e, opts);
  });
  const indexSessionId = RegistryObject.prototype.indexSessionId;
  vi.spyOn(RegistryObject.prototype, "indexSessionId").mockImplementation(function (
    this: RegistryObject,
    sessionId: string,
    key: string,
    spawnedBy: string | null,
  ) {
    writes.push({ method: "indexSessionId", key });
    return indexSessionId.call(this, sessionId, key, spawnedBy);
  });
  return writes;
}

describe("a new session's index write", () => {
  it("is one call into one shard: the sessionId shares the row's shard, and the row is listed and resolvable when the send is answered", async () => {
    configure("colo");
    // Runs stay open: the session never goes idle, so nothing but its creation writes its row.
    const held = deferred<string>();
    installFakes(() => held.promise);
    const writes = recordRegistryWrites();
    const keys = Array.from({ length: 12 }, (_, i) => `agent:colo:chat-${i}`);
    for (const key of keys) {
      const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hello" });
      expect(r.status).toBe(202);
      // Listed, with the locator beside it, as the send is answered.
      const shard = env.REGISTRY.getByName(shardName("colo", shardOf(key, SHARDS)));
      const indexed = await runInDurableObject(shard, async (obj: RegistryObject) => {
        const row = await obj.get(key);
        return { sessionId: row?.row.sessionId, located: row ? await obj.lookupSessionId(row.row.sessionId) : [] };
      });
      expect(indexed.sessionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(shardOf(indexed.sessionId!, SHARDS)).toBe(shardOf(key, SHARDS));
      expect(indexed.located).toEqual([key]);
    }
    for (const key of keys)
      expect(writes.filter((w) => w.key === key)).toEqual([{ method: "upsert", key, withLocator: true }]);
    const listed = await invoke("sessions_list", { limit: 50 }, { sessionKey: "agent:colo:main" });
    expect(listed.details.sessions.map((s: any) => s.key).sort()).toEqual([...keys].sort());
    held.resolve("done");
    await quiesce();
  });

  it("the answer to a send that creates its session waits for the session's index write", async () => {
    configure("waits");
    const held = deferred<string>();
    installFakes(() => held.promise);
    const key = "agent:waits:new";
    const reached = deferred<void>();
    const release = deferred<void>();
    const upsert = RegistryObject.prototype.upsert;
    vi.spyOn(RegistryObject.prototype, "upsert").mockImplementation(async function (
      this: RegistryObject,
      e: IndexEntry,
      opts?: { withLocator?: boolean },
    ) {
      if (e.key === key) {
        reached.resolve();
        await release.promise;
      }
      return upsert.call(this, e, opts);
    });
    let answered = false;
    const sent = invoke(
      "sessions_send",
      { sessionKey: key, message: "hi", timeoutSeconds: 0 },
      { sessionKey: "agent:waits:main" },
    ).then((r) => {
      answered = true;
      return r;
    });
    await reached.promise;
    // The write is held. Round trips into the session give an answer that did not wait every chance to arrive.
    for (let i = 0; i < 5; i++) await sessionStub(key).getMeta();
    expect(answered).toBe(false);
    release.resolve();
    expect((await sent).details).toMatchObject({ status: "accepted", sessionKey: key });
    const listed = await invoke("sessions_list", { limit: 5 }, { sessionKey: "agent:waits:main" });
    expect(listed.details.sessions.map((s: any) => s.key)).toContain(key);
    held.resolve("done");
    await quiesce();
  });

  it("a sessionId in another shard (a session from before) gets its locator written first, then the row", async () => {
    configure("elsewhere");
    const index = new SessionIndex(env, SHARDS, "elsewhere");
    const [entry] = syntheticIndexEntries([{ key: "agent:elsewhere:old", updatedAt: Date.now() }]);
    let sessionId = entry.sessionId;
    while (shardOf(sessionId, SHARDS) === shardOf(entry.key, SHARDS)) sessionId = crypto.randomUUID();
    const writes = recordRegistryWrites();
    await index.upsert({ ...entry, sessionId, row: { ...entry.row, sessionId } }, { locatorWritten: false });
    expect(writes).toEqual([
      { method: "indexSessionId", key: entry.key },
      { method: "upsert", key: entry.key, withLocator: false },
    ]);
    expect(await index.resolveSessionId(sessionId)).toEqual([entry.key]);
    // Written once per instance: later writes are the row alone.
    await index.upsert({ ...entry, sessionId, updatedAt: entry.updatedAt + 1 }, { locatorWritten: true });
    expect(writes.slice(2)).toEqual([{ method: "upsert", key: entry.key, withLocator: false }]);
  });
});

describe("a send's run", () => {
  it("starts after the send is answered, so its start is not part of the answer, and then runs", async () => {
    configure("later");
    installFakes(() => "done");
    const key = "agent:later:chat";
    const seen = await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      let kicked = 0;
      const kick = obj.kick.bind(obj);
      vi.spyOn(obj, "kick").mockImplementation(() => {
        kicked++;
        kick();
      });
      const run = await obj.enqueue({ input: { kind: "inbound", message: "hello" } });
      const atAnswer = { kicked, status: obj.runRow(run.runId)?.status };
      await new Promise((r) => setTimeout(r, 0));
      return { atAnswer, afterwards: kicked, runId: run.runId };
    });
    expect(seen.atAnswer).toEqual({ kicked: 0, status: "queued" });
    expect(seen.afterwards).toBe(1);
    const ended = await call("GET", `/v1/runs/${enc(seen.runId)}/wait?timeoutMs=10000`);
    expect(ended.json).toMatchObject({ status: "ok", reply: "done" });
    await quiesce();
  });
});

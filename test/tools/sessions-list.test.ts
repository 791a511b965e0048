import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import { RegistryObject } from "../../src/registry/registry-object";
import { sessionIndex } from "../../src/registry/session-index";
import { useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { type SyntheticRow, syntheticIndexEntries } from "../helpers/index-rows";

/** A config with these agents (first = default) and extra top-level sections. */
function configure(agents: (string | Record<string, unknown>)[], extra: Record<string, unknown> = {}) {
  const list = agents.map((a, i) => (typeof a === "string" ? { id: a, ...(i === 0 ? { default: true } : {}) } : a));
  setConfigOverride({ ...extra, agents: { ...(extra.agents as object), list } });
}

/** Index rows straight into an agent's registry shard (fast seeding of many sessions). */
async function seed(agentId: string, rows: SyntheticRow[]) {
  await sessionIndex(env, loadConfig(env), agentId).upsertMany(syntheticIndexEntries(rows));
}

/** What a shard's call costs in rows: the rows SQLite read for it (SqlStorageCursor.rowsRead of each statement). */
async function rowsRead<T>(
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

const keysOf = (r: { details: any }) => r.details.sessions.map((s: any) => s.key);
const list = (args: Record<string, unknown>, sessionKey: string) => invoke("sessions_list", args, { sessionKey });

/** Follow nextCursor to the end; returns every key in order and the page sizes. */
async function walk(args: Record<string, unknown>, sessionKey: string) {
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

describe("tool schemas", () => {
  it("numeric params of list, history and send are JSON-schema `number` (not integer) in the served schemas, with no anyOf/oneOf", async () => {
    const served = (await call("GET", "/v1/tools")).json.tools as { name: string; parameters: any }[];
    const schemaOf = (name: string) => served.find((t) => t.name === name)!.parameters;
    const numeric = (schema: any) =>
      Object.entries(schema.properties as Record<string, any>)
        .filter(([, p]) => p.type === "number" || p.type === "integer")
        .map(([name, p]) => [name, p.type]);
    // Every numeric parameter is `number`, and the ones OpenClaw names are among them.
    const expected: Record<string, string[]> = {
      sessions_list: ["limit", "activeMinutes", "messageLimit"],
      sessions_history: ["limit", "before"],
      sessions_send: ["timeoutSeconds"],
    };
    for (const [tool, names] of Object.entries(expected)) {
      const found = numeric(schemaOf(tool));
      expect(
        found.filter(([, type]) => type !== "number"),
        tool,
      ).toEqual([]);
      expect(
        found.map(([name]) => name),
        tool,
      ).toEqual(expect.arrayContaining(names));
    }
    expect(schemaOf("sessions_history").required).toEqual(["sessionKey"]);
    expect(schemaOf("sessions_send").required).toEqual(["message"]);
    expect(JSON.stringify(["sessions_list", "sessions_history", "sessions_send"].map(schemaOf))).not.toMatch(
      /anyOf|oneOf/,
    );
  });
});

describe("sessions_list parameters", () => {
  it("limit: default 50, floored, clamped to 200; rows newest first", async () => {
    configure(["bulk"], { tools: { sessions: { visibility: "agent" } } });
    const t0 = Date.now() - 10_000;
    await seed(
      "bulk",
      Array.from({ length: 230 }, (_, i) => ({ key: `agent:bulk:s${String(i).padStart(3, "0")}`, updatedAt: t0 + i })),
    );
    const def = await list({}, "agent:bulk:main");
    expect(def.status).toBe(200);
    expect(def.details.count).toBe(50);
    expect(keysOf(def)[0]).toBe("agent:bulk:s229");
    expect(def.details.sessions.map((s: any) => s.updatedAt)).toEqual(
      [...def.details.sessions.map((s: any) => s.updatedAt)].sort((a, b) => b - a),
    );
    expect((await list({ limit: 2.9 }, "agent:bulk:main")).details.count).toBe(2);
    expect((await list({ limit: 1 }, "agent:bulk:main")).details.count).toBe(1);
    expect((await list({ limit: 5000 }, "agent:bulk:main")).details.count).toBe(200);
    expect((await list({ limit: 0 }, "agent:bulk:main")).status).toBe(400);
    // snake_case aliases are accepted (src/tools/registry.ts).
    expect(
      (await invoke("sessions_list", { limit: 3, active_minutes: 60 }, { sessionKey: "agent:bulk:main" })).details
        .count,
    ).toBe(3);
  });

  it("cursor paging reaches every visible row exactly once, in order", async () => {
    configure(["pager"], { tools: { sessions: { visibility: "agent" } } });
    const t0 = Date.now() - 10_000;
    // Equal updatedAt values on purpose: the cursor orders ties by key.
    await seed(
      "pager",
      Array.from({ length: 23 }, (_, i) => ({
        key: `agent:pager:p${String(i).padStart(2, "0")}`,
        updatedAt: t0 + Math.floor(i / 3),
      })),
    );
    const all = (await list({ limit: 200 }, "agent:pager:main")).details.sessions.map((s: any) => s.key);
    expect(all).toHaveLength(23);
    const { keys, sizes } = await walk({ limit: 5 }, "agent:pager:main");
    expect(keys).toEqual(all);
    expect(sizes).toEqual([5, 5, 5, 5, 3]);
    expect((await list({ cursor: "not-a-cursor" }, "agent:pager:main")).status).toBe(400);
  });

  it("activeMinutes keeps rows updated within N minutes (floored, min 1)", async () => {
    configure(["act"], { tools: { sessions: { visibility: "agent" } } });
    const now = Date.now();
    await seed("act", [
      { key: "agent:act:fresh", updatedAt: now - 30_000 },
      { key: "agent:act:ten", updatedAt: now - 9 * 60_000 },
      { key: "agent:act:old", updatedAt: now - 3 * 3600_000 },
    ]);
    expect(keysOf(await list({ activeMinutes: 1 }, "agent:act:main"))).toEqual(["agent:act:fresh"]);
    expect(keysOf(await list({ activeMinutes: 10.9 }, "agent:act:main"))).toEqual(["agent:act:fresh", "agent:act:ten"]);
    expect(keysOf(await list({}, "agent:act:main"))).toEqual(["agent:act:fresh", "agent:act:ten", "agent:act:old"]);
    expect((await list({ activeMinutes: 0 }, "agent:act:main")).status).toBe(400);
  });

  it("kinds filters on the canonical kind; unknown kinds are dropped, none left = no filter", async () => {
    configure(["kinds"], { tools: { sessions: { visibility: "agent" } } });
    const t = Date.now() - 5000;
    await seed("kinds", [
      { key: "agent:kinds:main", updatedAt: t + 6 },
      { key: "agent:kinds:cron:job-1", updatedAt: t + 5 },
      { key: "agent:kinds:discord:group:dev", updatedAt: t + 4 },
      { key: "agent:kinds:hook:h1", updatedAt: t + 3 },
      { key: "agent:kinds:node-n1", updatedAt: t + 2 },
      { key: "agent:kinds:signal:direct:bob", updatedAt: t + 1 },
      { key: "agent:kinds:cron:job-1:run:r1", updatedAt: t + 7 }, // isolated cron runs are never listed
    ]);
    const cron = await list({ kinds: ["cron"] }, "agent:kinds:main");
    expect(cron.details.sessions).toEqual([
      expect.objectContaining({ key: "agent:kinds:cron:job-1", kind: "cron", channel: "internal" }),
    ]);
    expect(keysOf(await list({ kinds: ["MAIN", " group "] }, "agent:kinds:main"))).toEqual([
      "agent:kinds:main",
      "agent:kinds:discord:group:dev",
    ]);
    expect(keysOf(await list({ kinds: ["hook", "node", "other"] }, "agent:kinds:main"))).toEqual([
      "agent:kinds:hook:h1",
      "agent:kinds:node-n1",
      "agent:kinds:signal:direct:bob",
    ]);
    expect((await list({ kinds: ["bogus"] }, "agent:kinds:main")).details.count).toBe(6);
    expect((await list({}, "agent:kinds:main")).details.sessions.map((s: any) => s.kind)).toEqual([
      "main",
      "cron",
      "group",
      "hook",
      "node",
      "other",
    ]);
  });
});

describe("sessions_list rows", () => {
  it("the full row shape (the spec's row shape), with a real transcriptPath", async () => {
    const key = "agent:main:discord:channel:shape:thread:t-1";
    const route = {
      channel: "discord",
      to: "channel:shape",
      accountId: "acct-1",
      threadId: "thread-1",
      displayName: "discord:#shape",
    };
    const runs = [await sendAndWait(key, "hello", route), await sendAndWait(key, "hello again!", route)];
    await call("PATCH", `/v1/sessions/${enc(key)}`, {
      label: "Shape",
      thinkingLevel: "high",
      verboseLevel: "on",
      sendPolicy: "deny",
    });
    const r = await list({ limit: 200 }, key);
    const row = r.details.sessions.find((s: any) => s.key === key);
    const meta = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(row).toEqual({
      key,
      agentId: "main",
      kind: "group",
      channel: "discord",
      displayName: "discord:#shape",
      label: "Shape",
      updatedAt: expect.any(Number),
      sessionId: meta.sessionId,
      model: "echo",
      // The session's counters are the sum of its runs' usage; builtin/echo counts ≈4 characters per
      // token, so its two replies ("hello", "hello again!") are 2 + 3 output tokens.
      inputTokens: runs[0].usage.input + runs[1].usage.input,
      outputTokens: 5,
      totalTokens: runs[0].usage.input + runs[1].usage.input + 5,
      thinkingLevel: "high",
      verboseLevel: "on",
      systemSent: true,
      abortedLastRun: false,
      sendPolicy: "deny",
      lastChannel: "discord",
      lastTo: "channel:shape",
      deliveryContext: { channel: "discord", to: "channel:shape", accountId: "acct-1", threadId: "thread-1" },
      transcriptPath: `/v1/sessions/${enc(key)}/transcript.jsonl`,
    });
    expect(runs.map((r) => r.usage.output)).toEqual([2, 3]);
    expect(runs[0].usage.input).toBeGreaterThan(0);
    // The transcriptPath is fetchable with the same token.
    const t = await call("GET", row.transcriptPath);
    expect(t.status).toBe(200);
    // A numeric threadId is recorded as a string.
    await sendAndWait("agent:main:telegram:group:-100:topic:271", "topic", {
      channel: "telegram",
      to: "-100",
      threadId: 271,
    });
    const topic = (await call("GET", `/v1/sessions/${enc("agent:main:telegram:group:-100:topic:271")}`)).json;
    expect(topic.deliveryContext).toEqual({ channel: "telegram", to: "-100", threadId: "271" });
  });

  it("sub-agent rows carry spawnedBy, status, startedAt, endedAt, runtimeMs", async () => {
    const child = "agent:main:subagent:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e";
    await sessionStub(child).ensureSession({
      spawnedBy: "agent:main:main",
      spawnDepth: 1,
      label: "worker",
      subagent: {
        requesterKey: "agent:main:main",
        task: "t",
        mode: "run",
        cleanup: "keep",
        status: "done",
        startedAt: 100,
        endedAt: 142,
      },
    });
    const row = (await list({ limit: 200 }, "agent:main:main")).details.sessions.find((s: any) => s.key === child);
    expect(row).toMatchObject({
      key: child,
      kind: "other",
      spawnedBy: "agent:main:main",
      spawnDepth: 1,
      label: "worker",
      status: "done",
      startedAt: 100,
      endedAt: 142,
      runtimeMs: 42,
    });
  });

  it("messageLimit attaches the last N non-tool messages, capped at 20", async () => {
    const key = "agent:main:list-preview";
    await sendAndWait(key, "m0");
    await runInDurableObject(sessionStub(key), (obj) => {
      for (let i = 1; i <= 30; i++) {
        obj.transcript.append(
          { role: "user", content: [{ type: "text", text: `u${i}` }], timestamp: Date.now() },
          null,
        );
        obj.transcript.append(
          {
            role: "toolResult",
            toolCallId: `c${i}`,
            toolName: "sessions_list",
            content: [{ type: "text", text: `tool ${i}` }],
            isError: false,
            timestamp: Date.now(),
          },
          null,
        );
      }
    });
    const one = (await list({ messageLimit: 1, limit: 200 }, key)).details.sessions.find((s: any) => s.key === key);
    // The newest message is a toolResult: it is skipped, the preceding message is shown.
    expect(one.messages).toHaveLength(1);
    expect(one.messages[0]).toMatchObject({ role: "user", content: [{ type: "text", text: "u30" }] });
    const many = (await list({ messageLimit: 500, limit: 200 }, key)).details.sessions.find((s: any) => s.key === key);
    expect(many.messages).toHaveLength(20);
    expect(many.messages.every((m: any) => m.role !== "toolResult")).toBe(true);
    expect(many.messages.map((m: any) => m.content[0].text)).toEqual(
      Array.from({ length: 20 }, (_, i) => `u${i + 11}`),
    );
    const none = (await list({ messageLimit: 0, limit: 200 }, key)).details.sessions.find((s: any) => s.key === key);
    expect(none.messages).toBeUndefined();
    expect(
      (await list({ messageLimit: 2.7, limit: 200 }, key)).details.sessions.find((s: any) => s.key === key).messages,
    ).toHaveLength(2);
  });

  it("global and unknown are never listed: refused as keys at every entry point; under scope global the DM bucket is listed as main", async () => {
    const agents = { list: [{ id: "main", default: true }, { id: "research" }] };
    setConfigOverride({ tools: { sessions: { visibility: "agent" } }, agents });
    const reserved = [
      "global",
      "unknown",
      "agent:main:global",
      "agent:main:unknown",
      "agent:research:unknown",
      "Unknown",
    ];
    for (const k of reserved) {
      expect((await call("POST", `/v1/sessions/${enc(k)}/messages`, { message: "x" })).status, `POST ${k}`).toBe(400);
      expect((await call("PATCH", `/v1/sessions/${enc(k)}`, { label: "x" })).status, `PATCH ${k}`).toBe(400);
      expect(
        (await invoke("sessions_send", { sessionKey: k, message: "x", timeoutSeconds: 0 })).status,
        `send ${k}`,
      ).toBe(400);
      expect((await invoke("sessions_list", {}, { sessionKey: k })).status, `requester ${k}`).toBe(400);
    }
    await sendAndWait("agent:main:list-latest", "newest");
    const perSender = keysOf(await list({ limit: 200 }, "agent:main:main"));
    expect(perSender[0]).toBe("agent:main:list-latest"); // a list right after a message shows it first
    expect(perSender.filter((k: string) => /(^|:)(global|unknown)$/.test(k))).toEqual([]);

    // Under session.scope = "global" DMs live in the `global` object, listed (and addressed) as `main`.
    setConfigOverride({ session: { scope: "global" }, tools: { sessions: { visibility: "agent" } }, agents });
    const dm = await sendAndWait("global", "a DM in the global bucket");
    expect(dm.sessionKey).toBe("main"); // the run of the global bucket is shown as main, too
    const global = (await list({ limit: 200 }, "main")).details.sessions;
    expect(global[0]).toMatchObject({ key: "main", kind: "main" });
    expect(global.filter((s: any) => /(^|:)(global|unknown)$/.test(s.key))).toEqual([]);
    expect((await call("POST", `/v1/sessions/unknown/messages`, { message: "x" })).status).toBe(400);
  });
});

describe("sessions_list visibility", () => {
  async function seedTree(agent: string) {
    const t = Date.now() - 60_000;
    const me = `agent:${agent}:main`;
    // 30 sessions the caller must not see, all newer than the 5 it may see.
    const hidden = Array.from({ length: 30 }, (_, i) => ({
      key: `agent:${agent}:other-${i}`,
      updatedAt: t + 1000 + i,
    }));
    const grandchild = {
      key: `agent:${agent}:subagent:gc`,
      updatedAt: t + 2000,
      spawnedBy: `agent:${agent}:subagent:c0`,
    };
    const visible = [
      { key: me, updatedAt: t + 1 },
      ...Array.from({ length: 4 }, (_, i) => ({
        key: `agent:${agent}:subagent:c${i}`,
        updatedAt: t + 10 + i,
        spawnedBy: me,
      })),
    ];
    await seed(agent, [...hidden, grandchild, ...visible]);
    return { me, visible: visible.map((v) => v.key).reverse(), hidden: hidden.map((h) => h.key) };
  }

  it("tree (default): own session + direct children; full pages for a scoped caller", async () => {
    configure(["tree"]);
    const { me, visible } = await seedTree("tree");
    const first = await list({ limit: 3 }, me);
    expect(first.details).toMatchObject({ count: 3, visibility: "tree" });
    expect(keysOf(first)).toEqual(visible.slice(0, 3));
    const { keys, sizes } = await walk({ limit: 3 }, me);
    expect(keys).toEqual(visible);
    expect(sizes).toEqual([3, 2]);
  });

  it("a page after a cursor reads that page, not the rows before the cursor", async () => {
    configure(["paged"]);
    const rows: SyntheticRow[] = [];
    for (let n = 0; n < 3_200; n++)
      rows.push({ key: `agent:paged:s${String(n).padStart(4, "0")}`, updatedAt: 100 + n });
    await seed("paged", rows);
    const index = sessionIndex(env, loadConfig(env), "paged");
    // A cursor two thirds down the listing: ~133 rows of each shard are newer than it.
    const cursor = { updatedAt: 100 + 1_066, key: "agent:paged:s1066" };
    let read = 0;
    let listed = 0;
    for (const shard of index.allShards()) {
      const { rows: r, result } = await rowsRead(shard, (o) => o.list({ scope: { type: "agent" }, limit: 9, cursor }));
      read += r;
      listed += result.keys.length;
      expect(result.updatedAt.every((t) => t < cursor.updatedAt)).toBe(true);
    }
    expect(listed).toBe(16 * 9);
    // Each shard reads its 9 rows and the one that tells it more follow; the cursor's own shard also its row.
    expect(read).toBeLessThanOrEqual(16 * 10 + 1);
  });

  it("a tree page reads only the caller's children in each shard, not the shard's other rows", async () => {
    configure(["deep"]);
    const me = "agent:deep:main";
    // 3,200 sessions over the agent's 16 shards, 32 of them the caller's children: ~200 rows and ~2 children a shard.
    const rows: SyntheticRow[] = [{ key: me, updatedAt: 10 }];
    for (let n = 0; n < 3_200; n++)
      rows.push({ key: `agent:deep:s${n}`, updatedAt: 100 + n, ...(n % 100 === 0 ? { spawnedBy: me } : {}) });
    await seed("deep", rows);
    const index = sessionIndex(env, loadConfig(env), "deep");
    let read = 0;
    let listed = 0;
    for (const shard of index.allShards()) {
      const { rows, result } = await rowsRead(shard, (o) => o.list({ scope: { type: "tree", key: me }, limit: 50 }));
      read += rows;
      listed += result.keys.length;
    }
    expect(listed).toBe(33);
    // The children and the caller's own row, give or take each lookup's one step past its last match.
    expect(read).toBeLessThanOrEqual(33 + 2 * 16);
  });

  it("self: only the requester's own session", async () => {
    configure(["selfv"], { tools: { sessions: { visibility: "SELF" } } });
    const { me } = await seedTree("selfv");
    const r = await list({ limit: 3 }, me);
    expect(r.details).toMatchObject({ count: 1, visibility: "self" });
    expect(keysOf(r)).toEqual([me]);
  });

  it("agent: every session of the agent, none of another agent", async () => {
    configure(["agentv", "otherv"], { tools: { sessions: { visibility: "agent" } } });
    const { me, visible, hidden } = await seedTree("agentv");
    await seed("otherv", [{ key: "agent:otherv:main", updatedAt: Date.now() }]);
    const { keys } = await walk({ limit: 7 }, me);
    expect(keys).toHaveLength(visible.length + hidden.length + 1);
    expect(keys.some((k) => k.startsWith("agent:otherv:"))).toBe(false);
  });

  it("all: other agents' shards are merged by updatedAt only when tools.agentToAgent allows", async () => {
    const t = Date.now() - 60_000;
    configure(["alla", "allb", "allc"], { tools: { sessions: { visibility: "all" } } });
    await seed("alla", [
      { key: "agent:alla:main", updatedAt: t + 1 },
      { key: "agent:alla:x", updatedAt: t + 4 },
    ]);
    await seed("allb", [
      { key: "agent:allb:main", updatedAt: t + 3 },
      { key: "agent:allb:y", updatedAt: t + 6 },
    ]);
    await seed("allc", [{ key: "agent:allc:main", updatedAt: t + 5 }]);
    // a2a disabled: cross-agent rows are hidden.
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual(["agent:alla:x", "agent:alla:main"]);
    configure(["alla", "allb", "allc"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["alla", "allb"] } },
    });
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual([
      "agent:allb:y",
      "agent:alla:x",
      "agent:allb:main",
      "agent:alla:main",
    ]);
    const { keys, sizes } = await walk({ limit: 1 }, "agent:alla:main");
    expect(keys).toEqual(["agent:allb:y", "agent:alla:x", "agent:allb:main", "agent:alla:main"]);
    expect(sizes).toEqual([1, 1, 1, 1]);
    configure(["alla", "allb", "allc"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual([
      "agent:allb:y",
      "agent:allc:main",
      "agent:alla:x",
      "agent:allb:main",
      "agent:alla:main",
    ]);
  });

  it("sandboxed callers are clamped to spawned-only (tree) even under visibility all; clamp `all` lifts it", async () => {
    configure(["sbx", "peer"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      agents: { defaults: { sandbox: { mode: "all" } } },
    });
    const { me, visible } = await seedTree("sbx");
    await seed("peer", [{ key: "agent:peer:main", updatedAt: Date.now() }]);
    const r = await list({ limit: 200 }, me);
    expect(r.details.visibility).toBe("tree");
    expect(keysOf(r)).toEqual(visible);
    configure(["sbx", "peer"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      agents: { defaults: { sandbox: { mode: "all", sessionToolsVisibility: "all" } } },
    });
    const lifted = await list({ limit: 200 }, me);
    expect(lifted.details.visibility).toBe("all");
    expect(keysOf(lifted)).toContain("agent:peer:main");
  });
});

describe("GET /v1/sessions (operator listing)", () => {
  it("lists an agent's sessions with a cursor, and filters kinds", async () => {
    configure(["rest", "restb"]);
    const t = Date.now() - 5000;
    await seed(
      "rest",
      Array.from({ length: 7 }, (_, i) => ({
        key: i === 0 ? "agent:rest:cron:c" : `agent:rest:r${i}`,
        updatedAt: t + i,
      })),
    );
    const keys: string[] = [];
    let cursor: string | null = null;
    do {
      const r: { status: number; json: any } = await call(
        "GET",
        `/v1/sessions?agentId=rest&limit=3${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(r.status).toBe(200);
      keys.push(...r.json.sessions.map((s: any) => s.key));
      cursor = r.json.nextCursor;
    } while (cursor);
    expect(keys).toEqual([
      "agent:rest:r6",
      "agent:rest:r5",
      "agent:rest:r4",
      "agent:rest:r3",
      "agent:rest:r2",
      "agent:rest:r1",
      "agent:rest:cron:c",
    ]);
    const cron = await call("GET", "/v1/sessions?agentId=rest&kinds=cron");
    expect(cron.json.sessions.map((s: any) => s.key)).toEqual(["agent:rest:cron:c"]);
  });
});

describe("registry sync (coalesced writes)", () => {
  it("a failed registry write is owed durably: the index timer row writes it later", async () => {
    const key = "agent:main:list-owed";
    await sendAndWait(key, "first");
    // The registry is down until we say otherwise (also for the alarm's retries meanwhile).
    const upsert = vi.spyOn(RegistryObject.prototype, "upsert").mockRejectedValue(new Error("registry unavailable"));
    const run = await sendAndWait(key, "second");
    expect(run.status).toBe("ok");
    expect(upsert).toHaveBeenCalled();
    const stale = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    const fresh = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(stale.updatedAt).toBeLessThan(fresh.updatedAt);
    const timers = await runInDurableObject(sessionStub(key), (_o, st) =>
      st.storage.sql.exec("SELECT kind FROM timers WHERE kind = 'index'").toArray(),
    );
    expect(timers).toHaveLength(1);
    upsert.mockRestore();
    await advance(key, 70_000);
    const row = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    expect(row.updatedAt).toBe(fresh.updatedAt);
    expect(row.totalTokens).toBe(fresh.totalTokens);
  });

  it("a busy session does not write its row per message, and its row is current once it goes idle", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:list-busy";
    const upserts = vi.spyOn(RegistryObject.prototype, "upsert");
    const posted = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call("POST", `/v1/sessions/${enc(key)}/messages`, { message: `b${i}` })),
    );
    expect(posted.every((r) => r.status === 202)).toBe(true);
    const ofKey = () => upserts.mock.calls.filter(([e]) => e.key === key).length;
    // 30 messages queued: the row was written at creation and at most once or twice more, not 30 times.
    expect(ofKey()).toBeLessThanOrEqual(3);
    for (let i = 0; i < 30; i++) {
      await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
      fake.pending()[0].reply("ok");
    }
    const last = posted[posted.length - 1].json.runId;
    await call("GET", `/v1/runs/${last}/wait?timeoutMs=10000`);
    // 30 runs ended; only the run that left the queue empty wrote through (plus the odd coalesced timer).
    expect(ofKey()).toBeLessThanOrEqual(8);
    const row = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    expect(row).toMatchObject({ totalTokens: 210, model: "m1" });
  });
});

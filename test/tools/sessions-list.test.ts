import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { configure, keysOf, list, seed, walk } from "../helpers/listing";

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

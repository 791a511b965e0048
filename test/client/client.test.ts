import { exports } from "cloudflare:workers";
import { jsonSchema, tool } from "ai";
import { describe, expect, it } from "vitest";
import { isRefusal, SwitchboardApiError, SwitchboardClient } from "../../src/client/index";
import { setConfigOverride } from "../../src/config/load";
import { heartbeatTimer } from "../../src/events/heartbeat-timer";
import { TOOLS } from "../../src/tools/registry";
import { installFakeRuntime, runPosts } from "../helpers/fake-runtime";
import { GATEWAY, MAIN_TOKEN } from "../helpers/http";
import { deferred, until } from "../helpers/scripted";

const client = (token = GATEWAY, sessionKey?: string) =>
  new SwitchboardClient({
    baseUrl: "https://switchboard.test/",
    token,
    sessionKey,
    fetch: (input, init) => exports.default.fetch(input, init),
  });

const uniq = (p: string) => `agent:main:${p}-${crypto.randomUUID().slice(0, 8)}`;

describe("typed client against the Worker", () => {
  it("REST: send a message, wait for its run, read the session and its history", async () => {
    const sb = client(MAIN_TOKEN);
    const key = uniq("client");
    const accepted = await sb.sendMessage(key, { message: "hello client", channel: "slack", to: "C1" });
    expect(accepted).toMatchObject({ status: "accepted", sessionKey: key });
    const run = await sb.waitRun(accepted.runId, 10_000);
    expect(run).toMatchObject({ runId: accepted.runId, status: "ok", reply: "hello client" });
    expect(await sb.getRun(accepted.runId)).toEqual(run);
    expect(await sb.getSession(key)).toMatchObject({ key });
    const history = await sb.history(key, { limit: 10 });
    expect(history.messages).toHaveLength(2);
    expect((await sb.patchSession(key, { label: "from the client" })).label).toBe("from the client");
    const { agents } = await sb.agents();
    expect(agents.map((a) => a.id)).toEqual(["main", "research"]);
    // Typed as GET /v1/agents answers (src/http/api-schemas.ts): whether each agent can run here.
    expect(agents.map((a) => [a.available, a.sandbox])).toEqual([
      [true, "off"],
      [true, "off"],
    ]);
  });

  it("every tool has a typed method that returns the tool's payload", async () => {
    setConfigOverride({
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
      tools: { sessions: { visibility: "agent" } },
    });
    const me = uniq("me");
    const other = uniq("other");
    const sb = client(MAIN_TOKEN, me);
    await sb.sendMessage(me, { message: "mine" });
    await sb.waitRun((await sb.sendMessage(other, { message: "theirs" })).runId, 10_000);

    const list = await sb.sessionsList({ limit: 200 });
    expect(list.sessions.map((s) => s.key)).toContain(other);
    const history = await sb.sessionsHistory({ sessionKey: other });
    expect(isRefusal(history) ? history : history.messages.length).toBe(2);
    expect(await sb.sessionsSearch({ query: "nowordlikethisanywhere" })).toEqual({ results: [] });
    const sent = await sb.sessionsSend({ sessionKey: other, message: "ping", timeoutSeconds: 10 });
    expect(sent).toMatchObject({ status: "ok", reply: expect.stringMatching(/\nping$/) }); // builtin/echo repeats the marked message
    const spawned = await sb.sessionsSpawn({ task: "do a thing" });
    expect(spawned).toMatchObject({ status: "accepted" });
    expect(await sb.agentsList()).toMatchObject({ requester: "main" });
    const status = await sb.sessionStatus({ changesSince: 0 });
    expect(isRefusal(status) ? status : [status.sessionKey, status.stateChanges?.historyGap]).toEqual([me, false]);
    // sessions_yield ends a model turn; a client has none to end (test/tools/sessions-yield.test.ts).
    expect(await sb.sessionsYield()).toEqual({ status: "error", error: "Yield not supported in this context" });
    // A refusal is a result, as over /tools/invoke.
    const missing = crypto.randomUUID();
    expect(await sb.sessionsHistory({ sessionKey: missing })).toEqual({
      status: "error",
      error: `Session not found: ${missing} (use the full sessionKey from sessions_list)`,
    });
  });

  it("errors surface as SwitchboardApiError with the envelope's type and message", async () => {
    const sb = client(MAIN_TOKEN);
    const err = await sb.invoke("sessions_history", {}).catch((e) => e);
    expect(err).toBeInstanceOf(SwitchboardApiError);
    expect(err).toMatchObject({ status: 400, type: "invalid_request", message: "sessionKey required" });
    const cross = await sb.getSession("agent:research:main").catch((e) => e);
    expect(cross).toMatchObject({ status: 403, type: "forbidden" });
    const bad = await client("nope")
      .agentsList()
      .catch((e) => e);
    expect(bad).toMatchObject({ status: 401, type: "unauthorized" });
  });

  it("toolDefinitions: OpenAI function tools and AI SDK tools, from the gateway's schemas", async () => {
    const sb = client(MAIN_TOKEN);
    const openai = await sb.toolDefinitions("openai");
    expect(openai.map((t) => t.function.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    const history = openai.find((t) => t.function.name === "sessions_history")!;
    expect(history).toMatchObject({
      type: "function",
      function: {
        description: TOOLS.find((t) => t.name === "sessions_history")!.description,
        parameters: { type: "object", required: ["sessionKey"] },
      },
    });

    const defs = await sb.toolDefinitions("ai-sdk");
    // The shape plugs into the AI SDK as docs/clients.md shows.
    const aiTools = Object.fromEntries(
      Object.entries(defs).map(([name, d]) => [
        name,
        tool({
          description: d.description,
          inputSchema: jsonSchema<Record<string, unknown>>(d.inputSchema as Parameters<typeof jsonSchema>[0]),
          execute: d.execute,
        }),
      ]),
    );
    expect(Object.keys(aiTools).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    expect(await defs.agents_list.execute({})).toMatchObject({ requester: "main" });

    // A sub-agent session gets the sub-agent tool set.
    const sub = await client(MAIN_TOKEN, `agent:main:subagent:${crypto.randomUUID()}`).toolDefinitions("openai");
    expect(sub.map((t) => t.function.name)).not.toContain("sessions_spawn");
  });
});

describe("typed client: event streams", () => {
  it("watchSession resumes after the stream's maximum lifetime (end: lifetime) and misses nothing", async () => {
    // The bridge's lifetime timer, fired when the test says (src/events/heartbeat-timer.ts).
    // Each stream's lifetime ends when the test resolves its promise (made here, in the test's own context;
    // the bridge only waits on it, so the end is still written from the stream's own request).
    const real = { ...heartbeatTimer };
    const lifetimes = [deferred<void>(), deferred<void>()];
    let opened = 0;
    heartbeatTimer.after = (_ms, fire) => {
      void lifetimes[Math.min(opened++, lifetimes.length - 1)].promise.then(fire);
      return () => {};
    };
    try {
      const sb = client();
      const key = uniq("watch");
      await sb.waitRun((await sb.sendMessage(key, { message: "one" })).runId, 10_000);
      const seen: { event: string; text?: string; reason?: string }[] = [];
      const watching = (async () => {
        for await (const e of sb.watchSession(key)) {
          const data = e.data as { content?: { text?: string }[]; reason?: string };
          seen.push({ event: e.event, text: data?.content?.[0]?.text, reason: data?.reason });
          if (data?.content?.[0]?.text === "two") return;
        }
      })();
      await until(async () => expect(opened).toBe(1));
      lifetimes[0].resolve(); // the first stream reaches its lifetime: `end`, then it closes
      // The watch reconnects (with Last-Event-ID) instead of ending there.
      await until(async () => expect(opened).toBe(2));
      await sb.sendMessage(key, { message: "two" });
      await watching;
      expect(seen.filter((e) => e.event === "end")).toEqual([{ event: "end", reason: "lifetime" }]);
      expect(seen.filter((e) => e.event === "message").map((e) => e.text)).toContain("two");
    } finally {
      Object.assign(heartbeatTimer, real);
    }
  });
});

describe("typed client: a webhook runtime's calls", () => {
  it("heartbeatRun keeps a run without a deadline alive and hands a fresh token; completeRun ends it", async () => {
    installFakeRuntime({ defaults: { timeoutSeconds: 0 } });
    const accepted = await client().sendMessage(`agent:hook:client-${crypto.randomUUID().slice(0, 8)}`, {
      message: "long work",
    });
    await until(async () => expect(runPosts()).toHaveLength(1));
    const run = runPosts()[0];
    expect(run).toMatchObject({ runId: accepted.runId, deadline: null });
    await until(async () => expect((await client().getRun(accepted.runId)).status).toBe("running"));
    const beat = await client(run.runToken).heartbeatRun(run.runId);
    expect(beat.run.status).toBe("running");
    expect(beat.deadline).toBeNull();
    expect(beat.leaseExpiresAt).toBeGreaterThan(Date.now());
    const done = await client(beat.runToken).completeRun(run.runId, { reply: "finished" });
    expect(done).toMatchObject({ status: "ok", reply: "finished" });
  });
});

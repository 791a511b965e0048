import { runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { beginClosing } from "../../src/session/closing";
import type { SessionObject } from "../../src/session/session-object";
import { type FakeCall, useFakeProvider } from "../helpers/fake-provider";
import { call, GATEWAY, invoke, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";
import { evict } from "../helpers/restart";
import { installFakes, releaseAndSettleChildren, subagentConfig } from "../helpers/subagents";

afterEach(releaseAndSettleChildren);

/** Two models of one fake provider, priced, with a context window: the card has something to show. */
function twoModels(auto?: (c: FakeCall) => void, extra: Record<string, unknown> = {}) {
  const calls: string[] = [];
  useFakeProvider({
    auto: (c) => {
      calls.push(c.body.model);
      if (auto) auto(c);
      else c.reply("hi", { prompt: 1200, completion: 300 });
    },
    extraConfig: {
      models: {
        providers: {
          fake: {
            baseUrl: "https://llm.test/v1",
            apiKey: "k",
            models: [
              { id: "m1", contextWindow: 8000, cost: { input: 3, output: 15 } },
              { id: "m2", contextWindow: 16000 },
            ],
          },
        },
      },
      ...extra,
    },
  });
  return calls;
}

const status = (args: Record<string, unknown>, sessionKey: string, opts: { token?: string } = {}) =>
  invoke("session_status", args, { sessionKey, ...opts });

const DETAIL_KEYS = ["agentId", "changedModel", "ok", "sessionId", "sessionKey", "stateVersion", "statusText"];

describe("session_status", () => {
  it("answers the caller's own session with the status card as text and the spec's details", async () => {
    twoModels();
    const key = "agent:main:status-card";
    await sendAndWait(key, "hello");
    const r = await status({}, key);
    expect(r.status).toBe(200);
    const d = r.details;
    expect(Object.keys(d).sort()).toEqual(DETAIL_KEYS);
    expect(d).toMatchObject({ ok: true, sessionKey: key, agentId: "main", changedModel: false });
    expect(d.stateVersion).toBeGreaterThan(0);
    // The text block is the card itself, not JSON; details carries the same text.
    expect(r.body.result.content).toEqual([{ type: "text", text: d.statusText }]);
    const lines = d.statusText.split("\n");
    expect(lines[0]).toBe("🧠 Model: fake/m1 (agent default)");
    expect(lines).toContain("🧮 Tokens: 1,200 in · 300 out · 1,500 total");
    expect(lines).toContain("💵 Cost: ~$0.0081 (estimated at fake/m1 prices)");
    expect(lines).toContain("📚 Context: 1,200/8,000 (15%)");
    expect(lines).toContain("📌 Tasks: no sub-agents");
    expect(lines).toContain("🏃 Running: idle");
    expect(lines).toContain("🪢 Queue: 0 queued");
    expect(lines).toContain(`🔖 State version: ${d.stateVersion}`);
    expect(lines).toContain("🎛️ Modes: think off · verbose off");
    expect(lines.some((l: string) => l.startsWith(`🧵 Session: ${key} • id ${d.sessionId} • created `))).toBe(true);
    expect(lines.some((l: string) => /^🕒 Last activity: \d{4}-\d\d-\d\dT/.test(l))).toBe(true);
    // A session with a delivery route reports it, as its sessions_list row does (one builder for both).
    const routed = "agent:main:status-routed";
    await sendAndWait(routed, "hi", { channel: "telegram", to: "42", accountId: "acct-7", threadId: 9 });
    const route = { channel: "telegram", to: "42", accountId: "acct-7", threadId: "9" };
    const routedStatus = (await status({ changesSince: 0 }, routed)).details;
    expect(routedStatus.deliveryContext).toEqual(route);
    // The text: the card, then the route and the state changes, each a fenced JSON block.
    const [routeBlock, ...blocks] = routedStatus.statusText.split("\n\n").filter((p: string) => p.includes("```json"));
    expect(routeBlock).toBe(
      `Route context:\n\`\`\`json\n${JSON.stringify({ deliveryContext: route }, null, 2)}\n\`\`\``,
    );
    expect(blocks).toEqual([
      `Session state changes:\n\`\`\`json\n${JSON.stringify(routedStatus.stateChanges, null, 2)}\n\`\`\``,
    ]);
    expect(d.statusText).not.toContain("Route context");
    expect((await call("GET", `/v1/sessions/${encodeURIComponent(routed)}`)).json.deliveryContext).toEqual(route);
    // `current` and an explicit key are the same session; a sessionId resolves to it too.
    expect((await status({ sessionKey: "current" }, key)).details.sessionId).toBe(d.sessionId);
    expect((await status({ sessionKey: d.sessionId }, key)).details.sessionKey).toBe(key);
  });

  it("active: the running run's own route, only while it runs, in details and the route block", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:status-active";
    const sent = await call("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, {
      message: "hold on",
      channel: "telegram",
      to: "42",
      accountId: "bot-1",
      threadId: 7,
    });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const live = (await status({}, key)).details;
    const route = { channel: "telegram", to: "42", accountId: "bot-1", threadId: "7" };
    expect(live.active).toEqual(route);
    expect(live.statusText).toContain(
      `Route context:\n\`\`\`json\n${JSON.stringify({ deliveryContext: route, active: route }, null, 2)}\n\`\`\``,
    );
    fake.pending()[0].reply("done");
    await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`);
    const idle = (await status({}, key)).details;
    expect(idle.active).toBeUndefined();
    expect(idle.deliveryContext).toEqual(route);
  });

  it("the model override: set, unchanged, applied to the next run (also after an eviction), cleared by default or empty", async () => {
    const calls = twoModels();
    const key = "agent:main:status-model";
    await sendAndWait(key, "first");
    expect(calls.at(-1)).toBe("m1");
    const set = await status({ model: "fake/m2" }, key);
    expect(set.details).toMatchObject({
      changedModel: true,
      model: "m2",
      modelProvider: "fake",
      modelOverride: "fake/m2",
    });
    expect(set.details.statusText.split("\n")[0]).toBe(
      '🧠 Model: fake/m2 (session override · clear with model "default") · last run: fake/m1',
    );
    expect((await status({ model: "fake/m2" }, key)).details.changedModel).toBe(false);
    await evict(sessionStub(key));
    await sendAndWait(key, "second");
    expect(calls.at(-1)).toBe("m2");
    const cleared = await status({ model: "DEFAULT" }, key);
    expect(cleared.details).toMatchObject({
      changedModel: true,
      model: "m1",
      modelProvider: "fake",
      modelOverride: null,
    });
    await sendAndWait(key, "third");
    expect(calls.at(-1)).toBe("m1");
    await status({ model: "fake/m2" }, key);
    expect((await status({ model: "" }, key)).details).toMatchObject({ changedModel: true, modelOverride: null });
    // Only the session's own override: the agent's model and other sessions are untouched.
    expect((await call("GET", `/v1/sessions/${encodeURIComponent(key)}`)).json.model).toBe("m1");
  });

  it("refuses an unknown model with the spec's text and changes nothing", async () => {
    twoModels();
    const key = "agent:main:status-bad-model";
    await sendAndWait(key, "x");
    const r = await status({ model: "nope/x" }, key);
    expect(r.status).toBe(200);
    expect(r.details).toMatchObject({ status: "error", tool: "session_status", error: 'Unrecognized model "nope/x".' });
    expect(r.details.reason).toContain("nope");
    expect((await sessionStub(key).getMeta())!.modelOverride).toBeUndefined();
  });

  it("a session being deleted takes no model change: 409 with the object's text, nothing changed", async () => {
    twoModels();
    const key = "agent:main:status-closing";
    await sendAndWait(key, "x");
    const stub: DurableObjectStub = sessionStub(key);
    const release = await runInDurableObject(stub, (obj: SessionObject) => beginClosing(obj, "deleted"));
    const r = await status({ model: "fake/m2" }, key);
    expect(r.status).toBe(409);
    expect(r.body.error).toEqual({
      type: "conflict",
      message: `Session ${key} is being deleted; nothing was accepted. Send again once it is gone.`,
    });
    // A read without a change is still answered.
    expect((await status({}, key)).details.ok).toBe(true);
    await runInDurableObject(stub, () => release());
    expect((await sessionStub(key).getMeta())!.modelOverride).toBeUndefined();
  });

  it("errors: unknown key or sessionId (nothing created), bad changesSince", async () => {
    twoModels(undefined, { tools: { sessions: { visibility: "all" } } });
    const me = "agent:main:status-errors";
    await sendAndWait(me, "x");
    const missing = await status({ sessionKey: "agent:main:never-made" }, me);
    expect(missing.details).toEqual({
      status: "error",
      tool: "session_status",
      error: "Unknown sessionKey: agent:main:never-made",
    });
    expect(await sessionStub("agent:main:never-made").getMeta()).toBeNull();
    // Without sessionKey the caller's own session is meant, and named.
    expect((await status({}, "agent:main:never-made-me")).details.error).toBe(
      "Unknown sessionKey: agent:main:never-made-me",
    );
    const id = "0b6f2d1e-9c41-4c52-9a57-3f0c5a8e6f1d";
    expect((await status({ sessionKey: id }, me)).details.error).toBe(`Unknown sessionId: ${id}`);
    // `main` is the caller's agent's main session.
    const main = await sessionStub("agent:main:main").ensureSession();
    expect((await status({ sessionKey: "main" }, me)).details).toMatchObject({
      ok: true,
      sessionKey: "agent:main:main",
      agentId: "main",
      sessionId: main.sessionId,
    });
    for (const bad of [-1, 1.5, "3", true]) {
      const r = await status({ changesSince: bad }, me);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toBe("changesSince must be a non-negative integer");
    }
    expect((await status({ change_since: 1 }, me)).status).toBe(400);
    // snake_case spelling is accepted like every parameter.
    expect((await status({ changes_since: 0 }, me)).details.stateChanges.events.length).toBeGreaterThan(0);
  });

  it("visibility action status: tree, self and cross-agent denials with the spec's texts; a parent reads its child", async () => {
    twoModels(undefined, { tools: { sessions: { visibility: "tree" } } });
    const me = "agent:main:status-vis-me";
    const other = "agent:main:status-vis-other";
    await sendAndWait(me, "x");
    await sendAndWait(other, "y");
    const tree = await status({ sessionKey: other, model: "fake/m2" }, me);
    expect(tree.details).toEqual({
      status: "error",
      tool: "session_status",
      error: "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    // The refused call changed nothing.
    expect((await sessionStub(other).getMeta())!.modelOverride).toBeUndefined();
    const child = "agent:main:status-vis-child";
    await sessionStub(child).ensureSession({ spawnedBy: me, spawnDepth: 1 });
    expect((await status({ sessionKey: child }, me)).details).toMatchObject({ ok: true, sessionKey: child });
    const research = "agent:research:status-vis";
    await sendAndWait(research, "z", {}, { token: RESEARCH_TOKEN });
    // OpenClaw 2026's cross-agent text: the classic sentence and where agent pairs are restricted.
    expect((await status({ sessionKey: research }, me)).details.error).toBe(
      "Session status visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.",
    );
    // `main` is outside a non-main caller's tree.
    expect((await status({ sessionKey: "main" }, me)).details.error).toBe(tree.details.error);
    // Under tree a session outside the caller's tree is refused whether or not it exists: nothing is revealed.
    expect((await status({ sessionKey: "agent:main:status-vis-none" }, me)).details.error).toBe(tree.details.error);
    setConfigOverride({
      agents: {
        list: [
          { id: "main", default: true, model: "fake/m1" },
          { id: "research", model: "fake/m1" },
        ],
      },
      models: { providers: { fake: { baseUrl: "https://llm.test/v1", apiKey: "k", models: [{ id: "m1" }] } } },
      tools: { sessions: { visibility: "self" } },
    });
    expect((await status({ sessionKey: other }, me)).details.error).toBe(
      "Session status visibility is restricted to the current session (tools.sessions.visibility=self).",
    );
    expect((await status({}, me)).details.ok).toBe(true);
  });

  it("agent-to-agent under visibility all (disabled, not allowed) and the sandbox clamp, with the spec's texts", async () => {
    const cfg = (tools: Record<string, unknown>, agents: Record<string, unknown> = {}) =>
      setConfigOverride({
        agents: {
          list: [
            { id: "main", default: true, model: "fake/m1" },
            { id: "research", model: "fake/m1" },
          ],
          ...agents,
        },
        models: { providers: { fake: { baseUrl: "https://llm.test/v1", apiKey: "k", models: [{ id: "m1" }] } } },
        tools,
      });
    twoModels();
    const me = "agent:main:status-a2a-me";
    const research = "agent:research:status-a2a";
    const stranger = "agent:main:status-a2a-stranger";
    const child = "agent:main:status-a2a-child";
    await sendAndWait(me, "x");
    await sendAndWait(stranger, "y");
    await sendAndWait(research, "z", {}, { token: RESEARCH_TOKEN });
    await sessionStub(child).ensureSession({ spawnedBy: me, spawnDepth: 1 });
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: false } });
    expect((await status({ sessionKey: research }, me)).details).toEqual({
      status: "error",
      tool: "session_status",
      error: "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
    });
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main"] } });
    expect((await status({ sessionKey: research }, me)).details.error).toBe(
      "Agent-to-agent status denied by tools.agentToAgent.allow.",
    );
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } });
    expect((await status({ sessionKey: research }, me)).details.sessionKey).toBe(research);
    // Sandboxed (clamp "spawned"): only its own session and its children, by key or by sessionId.
    cfg(
      { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      { defaults: { sandbox: { mode: "all" } } },
    );
    expect((await status({ sessionKey: stranger }, me)).details).toEqual({
      status: "error",
      tool: "session_status",
      error: `Session not visible from this sandboxed agent session: ${stranger}`,
    });
    const strangerId = (await sessionStub(stranger).getMeta())!.sessionId;
    expect((await status({ sessionKey: strangerId }, me)).details.error).toBe(
      `Session not visible from this sandboxed agent session: ${strangerId}`,
    );
    expect((await status({ sessionKey: child }, me)).details.sessionKey).toBe(child);
    expect((await status({}, me)).details.sessionKey).toBe(me);
  });

  it("sub-agents never have it: 404 over /tools/invoke, absent from their MCP tool list", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 2 } }));
    installFakes(() => "ok");
    const child = (await invoke("sessions_spawn", { task: "t" })).details.childSessionKey;
    const r = await status({}, child);
    expect(r.status).toBe(404);
    expect(r.body.error.message).toBe("Tool not available for this session: session_status");
    const tools = await call("GET", "/v1/tools", undefined, { headers: { "X-Session-Key": child } });
    expect(tools.json.tools.map((t: any) => t.name)).not.toContain("session_status");
    // The parent (a main session) has it, and sees its child's card with the lineage line.
    const parent = await status({ sessionKey: child }, "agent:main:main");
    expect(parent.details.statusText).toContain("sub-agent of agent:main:main (depth 1");
    expect((await status({}, "agent:main:main")).details.statusText).toMatch(/📌 Tasks: \d+ active · \d+ finished/);
  });

  it("over MCP the text content is the card and structuredContent the details", async () => {
    twoModels();
    const key = "agent:main:status-mcp";
    await sendAndWait(key, "x");
    const res = await exports.default.fetch("https://sb.test/mcp", {
      method: "POST",
      headers: {
        Authorization: `Bearer ${GATEWAY}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "X-Session-Key": key,
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "session_status", arguments: { changesSince: 0 } },
      }),
    });
    const out = ((await res.json()) as any).result;
    expect(out.isError).toBeUndefined();
    expect(out.content[0].text.startsWith("🧠 Model: fake/m1")).toBe(true);
    expect(out.content[0].text).toContain("Session state changes:\n```json\n");
    expect(out.structuredContent).toMatchObject({ ok: true, sessionKey: key });
    expect(out.content[0].text).toBe(out.structuredContent.statusText);
  });
});

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { parseAgentTokens } from "../../src/http/agent-tokens";
import { authLimiter } from "../../src/http/rate-limit";
import worker from "../../src/index";
import type { WebhookRunRequest } from "../../src/runners/webhook-runner";
import { call, enc, GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "../helpers/http";

/**
 * What each token may do (src/http/scopes.ts, src/http/agent-tokens.ts): run tokens call the tools as
 * their session and complete their own run, nothing else; send-policy changes need the operator; a
 * malformed AGENT_TOKENS fails closed; `senderIsOwner` is honoured from the operator only.
 */
const RUNTIME_URL = "https://runtime.test/scopes";
let received: WebhookRunRequest[] = [];

beforeEach(() => {
  authLimiter.reset();
  received = [];
  setConfigOverride({
    agents: {
      defaults: { timeoutSeconds: 120 },
      list: [
        { id: "main", default: true },
        { id: "research" },
        { id: "hook", runtime: { type: "webhook", url: RUNTIME_URL } },
      ],
    },
  });
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.startsWith(RUNTIME_URL)) return realFetch(input, init);
    received.push(JSON.parse(String(init?.body)) as WebhookRunRequest);
    return new Response(null, { status: 202 });
  });
});

const uniq = (p: string) => `${p}-${crypto.randomUUID().slice(0, 8)}`;
const FORBIDDEN = { ok: false, error: { type: "forbidden", message: expect.any(String) } };

/** A webhook run held open by its runtime (202), with the run token it was given. */
async function heldRun(key: string): Promise<{ runId: string; token: string }> {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "work" });
  expect(r.status).toBe(202);
  // Wait for this run's own request: an earlier run's request says nothing about this one, which may start after its 202.
  for (let i = 0; i < 200 && !received.some((x) => x.runId === r.json.runId); i++)
    await new Promise((res) => setTimeout(res, 5));
  const req = received.find((x) => x.runId === r.json.runId)!;
  expect(req).toBeDefined();
  return { runId: r.json.runId, token: req.runToken };
}

describe("run tokens: the tools as their session, and their own /complete — nothing else", () => {
  it("tools over /tools/invoke, /mcp and GET /v1/tools work; every other /v1 write is a 403 envelope and changes nothing", async () => {
    const key = `agent:hook:${uniq("scoped")}`;
    const { runId, token } = await heldRun(key);

    const invoked = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token },
    );
    expect(invoked.status).toBe(200);
    expect(invoked.json.result.details.sessionKey).toBe(key);
    const mcp = await call(
      "POST",
      "/mcp",
      {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "sessions_history", arguments: { sessionKey: "current" } },
      },
      { token, headers: { Accept: "application/json, text/event-stream" } },
    );
    expect(mcp.status).toBe(200);
    expect(mcp.json.result.structuredContent.sessionKey).toBe(key);
    const catalog = await call("GET", "/v1/tools", undefined, { token });
    expect(catalog.status).toBe(200);
    expect(catalog.json.sessionKey).toBe(key);
    // Reads of its own session stay open.
    expect((await call("GET", `/v1/sessions/${enc(key)}`, undefined, { token })).status).toBe(200);
    expect((await call("GET", `/v1/runs/${runId}`, undefined, { token })).status).toBe(200);

    const before = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    for (const [method, path, body] of [
      ["POST", `/v1/sessions/${enc(key)}/messages`, { message: "more work" }],
      ["POST", "/v1/sessions/current/messages", { message: "more work" }],
      ["PATCH", `/v1/sessions/${enc(key)}`, { label: "renamed" }],
      ["PATCH", `/v1/sessions/${enc(key)}`, { sendPolicy: "deny" }],
      ["DELETE", `/v1/sessions/${enc(key)}`],
      ["POST", `/v1/runs/${runId}/abort`],
      ["POST", `/v1/sessions/${enc(key)}/deliveries/some-id/retry`],
    ] as const) {
      const r = await call(method, path, body, { token });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.json).toEqual(FORBIDDEN);
      expect(r.json.error.message).toBe(
        `A run token may call the tools and POST /v1/runs/${runId}/complete or /heartbeat; ${method} ${path.replace(/\/$/, "")} needs an agent or operator token`,
      );
    }
    const after = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(after).toEqual(before);
    expect((await call("GET", `/v1/runs/${runId}`)).json.status).toBe("running");

    // Its own run: completed. (Another run's /complete is refused by the route itself.)
    const other = await heldRun(`agent:hook:${uniq("other")}`);
    expect((await call("POST", `/v1/runs/${other.runId}/complete`, { reply: "not mine" }, { token })).status).toBe(403);
    const done = await call("POST", `/v1/runs/${runId}/complete`, { reply: "finished" }, { token });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ runId, status: "ok", reply: "finished" });
    await call("POST", `/v1/runs/${other.runId}/complete`, { reply: "x" }, { token: other.token });
  });
});

describe("send policy changes need the operator token", () => {
  it("PATCH sendPolicy with an agent token → 403, nothing changes; other fields stay the agent's to change; the operator may", async () => {
    const key = `agent:main:${uniq("patch-policy")}`;
    await sendAndWait(key, "hello", {}, { token: MAIN_TOKEN });
    const refused = await call(
      "PATCH",
      `/v1/sessions/${enc(key)}`,
      { sendPolicy: "deny", label: "with policy" },
      { token: MAIN_TOKEN },
    );
    expect(refused.status).toBe(403);
    expect(refused.json).toEqual({
      ok: false,
      error: { type: "forbidden", message: "Changing sendPolicy needs the operator token (GATEWAY_TOKEN)" },
    });
    const row = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(row.sendPolicy).toBeUndefined();
    expect(row.label).toBeUndefined();
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { sendPolicy: null }, { token: MAIN_TOKEN })).status).toBe(
      403,
    );
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "mine" }, { token: MAIN_TOKEN })).json.label).toBe(
      "mine",
    );
    expect(
      (await call("PATCH", `/v1/sessions/${enc(key)}`, { sendPolicy: "deny" }, { token: GATEWAY })).json.sendPolicy,
    ).toBe("deny");
  });
});

describe("/send on|off|inherit is owner-only; senderIsOwner is the operator's to claim", () => {
  it("senderIsOwner: true from an agent token → 403 and nothing is stored", async () => {
    const key = `agent:main:${uniq("claim")}`;
    const r = await call(
      "POST",
      `/v1/sessions/${enc(key)}/messages`,
      { message: "/send off", senderIsOwner: true },
      { token: MAIN_TOKEN },
    );
    expect(r.status).toBe(403);
    expect(r.json).toEqual({
      ok: false,
      error: { type: "forbidden", message: "senderIsOwner: true needs the operator token (GATEWAY_TOKEN)" },
    });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
  });

  it("a /send from a non-owner is an ordinary message: the model answers and the policy does not change", async () => {
    const key = `agent:main:${uniq("non-owner")}`;
    for (const [token, extra] of [
      [MAIN_TOKEN, {}],
      [GATEWAY, {}],
      [GATEWAY, { senderIsOwner: false }],
    ] as const) {
      const run = await sendAndWait(key, "/send off", extra, { token });
      expect(run.status).toBe("ok");
      expect(run.reply).not.toBe("⚙️ Send policy set to off.");
      expect(run.kind).toBe("inbound");
      expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBeUndefined();
    }
    // Nor is a /send that arrives through sessions_send (another session's agent, never an owner).
    const viaTool = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_send", args: { sessionKey: key, message: "/send off", timeoutSeconds: 0 }, sessionKey: key },
      { token: MAIN_TOKEN },
    );
    expect(viaTool.json.result.details.status).toBe("accepted");
    const sent = await call("GET", `/v1/runs/${viaTool.json.result.details.runId}/wait?timeoutMs=10000`);
    expect(sent.json).toMatchObject({ status: "ok", kind: "send" });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBeUndefined();
    // The owner's (operator's) command takes effect.
    const owner = await sendAndWait(key, "/send off", { senderIsOwner: true }, { token: GATEWAY });
    expect(owner).toMatchObject({ status: "ok", kind: "command", reply: "⚙️ Send policy set to off." });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("deny");
    // …and a later non-owner /send on cannot undo it.
    await sendAndWait(key, "/send on", {}, { token: MAIN_TOKEN });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("deny");
  });

  it("senderIsOwner must be a boolean", async () => {
    const r = await call("POST", `/v1/sessions/${enc(`agent:main:${uniq("type")}`)}/messages`, {
      message: "/send off",
      senderIsOwner: "yes",
    });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^senderIsOwner: /);
  });
});

describe("a malformed AGENT_TOKENS fails closed", () => {
  async function fetchWith(agentTokens: unknown, token: string) {
    const ctx = createExecutionContext();
    const res = await worker.fetch(
      new Request("https://switchboard.test/v1/agents", { headers: { Authorization: `Bearer ${token}` } }),
      { ...env, AGENT_TOKENS: agentTokens } as Env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return { status: res.status, json: (await res.json()) as any };
  }

  it("not JSON, not an object, short or non-string tokens, bad agent ids: every request answers a 500 config error naming AGENT_TOKENS", async () => {
    for (const [raw, why] of [
      ["{main: a}", "not valid JSON"],
      ['["test-main-agent-token"]', "not a JSON object"],
      ['"test-main-agent-token"', "not a JSON object"],
      [JSON.stringify({ main: "a" }), 'the token of "main" must be 16–4096 characters without whitespace'],
      [JSON.stringify({ main: "fifteen-chars!!" }), 'the token of "main" must be 16–4096 characters'],
      [
        JSON.stringify({ main: "sixteen chars  x" }),
        'the token of "main" must be 16–4096 characters without whitespace',
      ],
      [JSON.stringify({ main: 12345678901234 }), 'the token of "main" is not a string'],
      [JSON.stringify({ "bad id!": "a-long-enough-token" }), 'agent id "bad id!" must match'],
      [
        JSON.stringify({ Main: "a-long-enough-token-1", main: "a-long-enough-token-2" }),
        'agent id "main" appears twice',
      ],
    ] as const) {
      for (const token of ["a", "fifteen-chars!!", "a-long-enough-token", GATEWAY]) {
        const r = await fetchWith(raw, token);
        expect(r.status, `${raw} with ${token}`).toBe(500);
        expect(r.json.error.type).toBe("config_error");
        expect(r.json.error.message).toContain(`Invalid AGENT_TOKENS: ${why}`);
      }
    }
  });

  it("a well-formed AGENT_TOKENS works (as an object binding too); absent means no agent tokens", async () => {
    expect((await fetchWith(JSON.stringify({ main: "a-long-enough-token" }), "a-long-enough-token")).status).toBe(200);
    expect((await fetchWith({ research: "another-long-token" }, "another-long-token")).status).toBe(200);
    expect((await fetchWith(undefined, GATEWAY)).status).toBe(200);
    expect((await fetchWith(undefined, MAIN_TOKEN)).status).toBe(401);
    expect(parseAgentTokens(JSON.stringify({ Research: RESEARCH_TOKEN }))).toEqual({ research: RESEARCH_TOKEN });
  });
});

import { beforeEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { authLimiter } from "../src/http/rate-limit";
import { call, enc, GATEWAY, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "./helpers/http";

beforeEach(() => {
  authLimiter.reset();
  setConfigOverride(null);
});

const UNAUTHORIZED = (message: string) => ({ ok: false, error: { type: "unauthorized", message } });

describe("bearer tokens (DESIGN §3.2)", () => {
  it("401 without a token, with a malformed header, or with a wrong token — on every protected surface", async () => {
    for (const [method, path, body] of [
      ["POST", "/tools/invoke", { tool: "sessions_list" }],
      ["GET", "/v1/sessions"],
      ["GET", "/v1/agents"],
      ["POST", "/v1/sessions/main/messages", { message: "x" }],
    ] as const) {
      const none = await call(method, path, body, { token: null });
      expect(none.status).toBe(401);
      expect(none.json).toEqual(UNAUTHORIZED("Missing bearer token: send Authorization: Bearer <token>"));
      expect(none.headers.get("WWW-Authenticate")).toContain("Bearer");
      const bad = await call(method, path, body, { token: "nope" });
      expect(bad.status).toBe(401);
      expect(bad.json).toEqual(UNAUTHORIZED("Invalid bearer token"));
      authLimiter.reset();
    }
    const basic = await call("GET", "/v1/sessions", undefined, { token: null, headers: { Authorization: `Basic ${btoa("a:b")}` } });
    expect(basic.status).toBe(401);
    // A prefix or an extension of a valid token is not valid.
    expect((await call("GET", "/v1/agents", undefined, { token: GATEWAY.slice(0, -1) })).status).toBe(401);
    expect((await call("GET", "/v1/agents", undefined, { token: `${GATEWAY}x` })).status).toBe(401);
  });

  it("an unauthenticated message creates nothing", async () => {
    const key = "agent:main:auth-nothing";
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "sneaky" }, { token: "wrong" });
    expect(r.status).toBe(401);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
  });

  it("/healthz needs no token", async () => {
    expect((await call("GET", "/healthz", undefined, { token: null })).status).toBe(200);
  });

  it("the operator token may act as any session of any agent", async () => {
    const r = await invoke("sessions_list", {}, { sessionKey: "agent:research:main" });
    expect(r.status).toBe(200);
    const run = await sendAndWait("agent:research:auth-op", "operator writes here");
    expect(run.status).toBe("ok");
    expect((await call("GET", `/v1/sessions/${enc("agent:research:auth-op")}`)).status).toBe(200);
  });

  it("an agent token acts as its own agent: `main` is that agent's main", async () => {
    const r = await invoke("sessions_history", { sessionKey: "current" }, { token: RESEARCH_TOKEN });
    expect(r.status).toBe(200);
    expect(r.details.sessionKey).toBe("agent:research:main");
    const run = await sendAndWait("main", "research speaking", {}, { token: RESEARCH_TOKEN });
    expect(run.sessionKey).toBe("agent:research:main");
  });

  it("an agent token is confined to its agent's sessions (403)", async () => {
    const own = await sendAndWait("agent:main:auth-confined", "mine", {}, { token: MAIN_TOKEN });
    expect(own.status).toBe("ok");

    const asOther = await invoke("sessions_list", {}, { token: RESEARCH_TOKEN, sessionKey: "agent:main:main" });
    expect(asOther.status).toBe(403);
    expect(asOther.body).toEqual({
      ok: false,
      error: { type: "forbidden", message: 'The token of agent "research" cannot act on session agent:main:main (agent "main")' },
    });
    for (const [method, path, body] of [
      ["GET", `/v1/sessions/${enc("agent:main:auth-confined")}`],
      ["GET", `/v1/sessions/${enc("agent:main:auth-confined")}/history`],
      ["GET", `/v1/sessions/${enc("agent:main:auth-confined")}/transcript.jsonl`],
      ["PATCH", `/v1/sessions/${enc("agent:main:auth-confined")}`, { label: "stolen" }],
      ["DELETE", `/v1/sessions/${enc("agent:main:auth-confined")}`],
      ["POST", `/v1/sessions/${enc("agent:main:auth-confined")}/messages`, { message: "hijack" }],
      ["GET", `/v1/runs/${own.runId}`],
      ["GET", `/v1/runs/${own.runId}/wait?timeoutMs=0`],
      ["POST", `/v1/runs/${own.runId}/abort`],
      ["GET", "/v1/sessions?agentId=main"],
    ] as const) {
      const r = await call(method, path, body, { token: RESEARCH_TOKEN });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.json.error.type).toBe("forbidden");
    }
    // Un-prefixed keys belong to the default agent (main), so they are out of research's reach too.
    expect((await call("POST", "/v1/sessions/cron:auth-x/messages", { message: "x" }, { token: RESEARCH_TOKEN })).status).toBe(403);
    // Nothing changed: still one user message, no label.
    const row = await call("GET", `/v1/sessions/${enc("agent:main:auth-confined")}`, undefined, { token: MAIN_TOKEN });
    expect(row.json.label).toBeUndefined();
    const hist = await call("GET", `/v1/sessions/${enc("agent:main:auth-confined")}/history`, undefined, { token: MAIN_TOKEN });
    expect(hist.json.messages.filter((m: any) => m.role === "user")).toHaveLength(1);
  });

  it("an agent token's GET /v1/sessions lists only its own agent", async () => {
    await sendAndWait("agent:research:auth-list", "r", {}, { token: RESEARCH_TOKEN });
    await sendAndWait("agent:main:auth-list", "m", {}, { token: MAIN_TOKEN });
    const r = await call("GET", "/v1/sessions?limit=200", undefined, { token: RESEARCH_TOKEN });
    expect(r.status).toBe(200);
    expect(r.json.sessions.length).toBeGreaterThan(0);
    expect(r.json.sessions.every((s: any) => s.key.startsWith("agent:research:"))).toBe(true);
  });
});

describe("repeated failures (429)", () => {
  it("after the configured number of failures one client gets 429 with Retry-After, even with a valid token; others are unaffected", async () => {
    setConfigOverride({ agents: { list: [{ id: "main", default: true }, { id: "research" }] }, limits: { authFailuresPerMinute: 3 } });
    const attacker = { "CF-Connecting-IP": "203.0.113.7" };
    for (let i = 0; i < 3; i++) {
      const r = await call("GET", "/v1/agents", undefined, { token: `guess-${i}`, headers: attacker });
      expect(r.status).toBe(401);
    }
    const limited = await call("GET", "/v1/agents", undefined, { token: "guess-4", headers: attacker });
    expect(limited.status).toBe(429);
    expect(limited.json.error.type).toBe("rate_limited");
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers.get("Retry-After"))).toBeLessThanOrEqual(60);
    // A valid token from the same client is refused too, so guesses cannot be interleaved with good calls.
    expect((await call("GET", "/v1/agents", undefined, { token: GATEWAY, headers: attacker })).status).toBe(429);
    // Another client is not affected.
    expect((await call("GET", "/v1/agents", undefined, { token: GATEWAY, headers: { "CF-Connecting-IP": "198.51.100.1" } })).status).toBe(200);
  });

  it("the window passes: the limiter forgets failures after a minute", () => {
    const t0 = 1_000_000;
    authLimiter.recordFailure("c", t0);
    authLimiter.recordFailure("c", t0);
    expect(() => authLimiter.assertAllowed("c", 2, t0 + 1000)).toThrow(/retry after 59s/);
    expect(() => authLimiter.assertAllowed("c", 2, t0 + 60_000)).not.toThrow();
  });
});

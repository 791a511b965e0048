import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { authLimiter } from "../../src/http/rate-limit";
import { call, enc, GATEWAY, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "../helpers/http";

beforeEach(() => {
  authLimiter.reset();
  setConfigOverride(null);
});

let clients = 0;
/** A client address of its own (the documentation range), so one test's failures never limit another's. */
const freshClient = () => ({ "CF-Connecting-IP": `192.0.2.${++clients}` });

const UNAUTHORIZED = (message: string) => ({ ok: false, error: { type: "unauthorized", message } });

describe("bearer tokens", () => {
  it("401 without a token, with a malformed header, or with a wrong token — on every protected surface", async () => {
    // Each surface from its own client: failures are counted per client by the AUTH_FAILURES binding, which no test can reset.
    for (const [method, path, body] of [
      ["POST", "/tools/invoke", { tool: "sessions_list" }],
      ["GET", "/v1/sessions"],
      ["GET", "/v1/agents"],
      ["POST", "/v1/sessions/main/messages", { message: "x" }],
    ] as const) {
      const client = freshClient();
      const none = await call(method, path, body, { token: null, headers: client });
      expect(none.status).toBe(401);
      expect(none.json).toEqual(UNAUTHORIZED("Missing bearer token: send Authorization: Bearer <token>"));
      expect(none.headers.get("WWW-Authenticate")).toContain("Bearer");
      const bad = await call(method, path, body, { token: "nope", headers: client });
      expect(bad.status).toBe(401);
      expect(bad.json).toEqual(UNAUTHORIZED("Invalid bearer token"));
    }
    const basic = await call("GET", "/v1/sessions", undefined, {
      token: null,
      headers: { ...freshClient(), Authorization: `Basic ${btoa("a:b")}` },
    });
    expect(basic.status).toBe(401);
    // A prefix or an extension of a valid token is not valid.
    expect(
      (await call("GET", "/v1/agents", undefined, { token: GATEWAY.slice(0, -1), headers: freshClient() })).status,
    ).toBe(401);
    expect((await call("GET", "/v1/agents", undefined, { token: `${GATEWAY}x`, headers: freshClient() })).status).toBe(
      401,
    );
  });

  it("an unauthenticated message creates nothing", async () => {
    const key = "agent:main:auth-nothing";
    const r = await call(
      "POST",
      `/v1/sessions/${enc(key)}/messages`,
      { message: "sneaky" },
      { token: "wrong", headers: freshClient() },
    );
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
      error: {
        type: "forbidden",
        message: 'The token of agent "research" cannot act on session agent:main:main (agent "main")',
      },
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
    expect(
      (await call("POST", "/v1/sessions/cron:auth-x/messages", { message: "x" }, { token: RESEARCH_TOKEN })).status,
    ).toBe(403);
    // Nothing changed: still one user message, no label.
    const row = await call("GET", `/v1/sessions/${enc("agent:main:auth-confined")}`, undefined, { token: MAIN_TOKEN });
    expect(row.json.label).toBeUndefined();
    const hist = await call("GET", `/v1/sessions/${enc("agent:main:auth-confined")}/history`, undefined, {
      token: MAIN_TOKEN,
    });
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
  /** The AUTH_FAILURES binding's limit (wrangler.jsonc "ratelimits"), which counts across isolates. */
  const BINDING_LIMIT = 10;

  it("the Rate Limiting binding counts one address's failures: past its limit its failing requests get 429 with Retry-After, while valid tokens from it still work", async () => {
    // The in-isolate fallback's setting does not apply while the binding is bound.
    setConfigOverride({
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
      limits: { authFailuresPerMinute: 3 },
    });
    const attacker = { "CF-Connecting-IP": `203.0.113.${Math.floor(Math.random() * 250)}` };
    const statuses: number[] = [];
    // The binding counts in fixed periods: a period boundary during the loop may restart the count once.
    for (let i = 0; i < 2 * BINDING_LIMIT + 1 && !statuses.includes(429); i++) {
      statuses.push((await call("GET", "/v1/agents", undefined, { token: `guess-${i}`, headers: attacker })).status);
    }
    expect(statuses.length).toBeGreaterThanOrEqual(BINDING_LIMIT + 1);
    expect(statuses.slice(0, -1).every((s) => s === 401)).toBe(true);
    expect(statuses.at(-1)).toBe(429);
    const limited = await call("GET", "/v1/agents", undefined, { token: "guess-again", headers: attacker });
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({
      ok: false,
      error: {
        type: "rate_limited",
        message: expect.stringMatching(/^Too many failed authentication attempts; retry after \d+s$/),
      },
    });
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers.get("Retry-After"))).toBeLessThanOrEqual(60);
    // A valid token from the same address is never refused (test/http/auth-lockout.test.ts).
    expect((await call("GET", "/v1/agents", undefined, { token: GATEWAY, headers: attacker })).status).toBe(200);
    // The count lives in the binding, not in this isolate: it refuses the address too.
    expect((await env.AUTH_FAILURES!.limit({ key: `addr:${attacker["CF-Connecting-IP"]}` })).success).toBe(false);
    // Another client is not affected.
    expect(
      (await call("GET", "/v1/agents", undefined, { token: GATEWAY, headers: { "CF-Connecting-IP": "198.51.100.1" } }))
        .status,
    ).toBe(200);
  });

  it("a client refused by the binding is blocked for one period, then let through", async () => {
    const refusing = { limit: async () => ({ success: false }) } as RateLimit;
    const t0 = 1_000_000;
    await expect(authLimiter.recordFailure("c", refusing, 10, t0)).rejects.toMatchObject({
      status: 429,
      headers: { "Retry-After": "60" },
    });
    expect(() => authLimiter.assertAllowed("c", t0 + 1_000)).toThrow(/retry after 59s/);
    expect(() => authLimiter.assertAllowed("other", t0 + 1_000)).not.toThrow();
    expect(() => authLimiter.assertAllowed("c", t0 + 60_000)).not.toThrow();
  });

  it("without the binding, failures are counted in the isolate against limits.authFailuresPerMinute, and forgotten after a minute", async () => {
    const t0 = 1_000_000;
    await authLimiter.recordFailure("c", undefined, 2, t0);
    await authLimiter.recordFailure("c", undefined, 2, t0);
    await expect(authLimiter.recordFailure("c", undefined, 2, t0 + 500)).rejects.toMatchObject({ status: 429 });
    expect(() => authLimiter.assertAllowed("c", t0 + 1000)).toThrow(/retry after 60s/);
    expect(() => authLimiter.assertAllowed("c", t0 + 60_500)).not.toThrow();
    await authLimiter.recordFailure("c", undefined, 2, t0 + 61_000); // a new window: counted from one again
  });
});

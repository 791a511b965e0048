import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { call, enc, GATEWAY, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "./helpers/http";
import { baseConfig, HOOK_BASE, installFakes, MODEL_BASE, until } from "./helpers/scripted";

/** The secrets of this flow: bindings from vitest.config.ts, a channel webhookSecret and a provider apiKey. */
const SIGNING_SECRET = env.SIGNING_SECRET;
const WEBHOOK_SECRET = "hook-secret-log-test-5f2c";
const API_KEY = "sk-provider-key-log-test-81d9e0";
const SECRETS = [GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN, SIGNING_SECRET, WEBHOOK_SECRET, API_KEY];

/** Every console line the Worker and its objects print while a test runs (they share the test's isolate). */
function captureLogs(): string[] {
  const lines: string[] = [];
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      lines.push(
        args
          .map((a) => (typeof a === "string" ? a : a instanceof Error ? `${a.name}: ${a.message}` : JSON.stringify(a)))
          .join(" "),
      );
    });
  }
  return lines;
}

describe("structured logs of a full flow", () => {
  it("inbound message → run → webhook delivery → sessions_send → sessions_spawn: every line is JSON with the ids, no secret appears", async () => {
    setConfigOverride(
      baseConfig({
        models: { providers: { fake: { baseUrl: MODEL_BASE, apiKey: API_KEY } } },
        channels: { discord: { webhookUrl: `${HOOK_BASE}/discord`, webhookSecret: WEBHOOK_SECRET } },
      }),
    );
    const fakes = installFakes((r) =>
      // A provider that echoes the key in its error, as real ones do for a wrong key.
      r.lastUser === "fail please"
        ? new Error(`Incorrect API key provided: ${API_KEY}`)
        : r.kind === "announce"
          ? "ANNOUNCE_SKIP"
          : r.kind === "turn"
            ? "REPLY_SKIP"
            : `echo: ${r.lastUser}`,
    );
    const lines = captureLogs();

    // Inbound message with delivery, by the main agent's token.
    const key = `agent:main:discord:channel:log-${crypto.randomUUID().slice(0, 8)}`;
    const sent = await call(
      "POST",
      `/v1/sessions/${enc(key)}/messages`,
      { message: "hello logs", channel: "discord", to: "c1", deliver: true },
      { token: MAIN_TOKEN },
    );
    expect(sent.status).toBe(202);
    const requestId = sent.headers.get("X-Request-Id")!;
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    const runId = sent.json.runId as string;
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json.status).toBe("ok");
    await until(async () => expect(fakes.hooks).toHaveLength(1));

    // A run failing with the provider's error, sessions_send to another session, a sub-agent, a refused token.
    const failed = await sendAndWait(key, "fail please");
    expect(failed.status).toBe("error");
    const target = `agent:research:discord:group:log-${crypto.randomUUID().slice(0, 8)}`;
    expect(
      (await invoke("sessions_send", { sessionKey: target, message: "ping", timeoutSeconds: 10 }, { sessionKey: key }))
        .status,
    ).toBe(200);
    const spawned = await invoke("sessions_spawn", { task: "child task" }, { sessionKey: key });
    expect(spawned.details.status).toBe("accepted");
    expect((await call("GET", `/v1/runs/${spawned.details.runId}/wait?timeoutMs=10000`)).json.status).toBe("ok");
    const refused = await call("GET", "/v1/sessions", undefined, { token: `${GATEWAY}x` });
    expect(refused.status).toBe(401);
    // Error responses carry their request id too.
    expect(refused.headers.get("X-Request-Id")).toMatch(/^[0-9a-f-]{36}$/);
    // The caller's own plain request id is kept and echoed.
    const tagged = await call("GET", "/healthz", undefined, { headers: { "X-Request-Id": "trace-42.a" } });
    expect(tagged.headers.get("X-Request-Id")).toBe("trace-42.a");

    await until(async () =>
      expect(lines.some((l) => l.includes('"event":"run_ended"') && l.includes(spawned.details.runId))).toBe(true),
    );

    // Every line is one JSON object with a level and an event.
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const r of records) {
      expect(["info", "warn", "error"]).toContain(r.level);
      expect(typeof r.event).toBe("string");
    }
    // No secret anywhere, not even inside the provider's error text.
    for (const secret of SECRETS) expect(lines.filter((l) => l.includes(secret))).toEqual([]);

    // The ids: the request line carries the id the response returned; the run and the delivery name their run and session.
    expect(records).toContainEqual(
      expect.objectContaining({
        level: "info",
        event: "request",
        requestId,
        method: "POST",
        path: `/v1/sessions/${enc(key)}/messages`,
        status: 202,
        caller: "agent",
        agentId: "main",
      }),
    );
    expect(records).toContainEqual(
      expect.objectContaining({ event: "request", requestId: "trace-42.a", path: "/healthz", status: 200 }),
    );
    expect(records).toContainEqual(
      expect.objectContaining({
        event: "request",
        requestId: refused.headers.get("X-Request-Id"),
        path: "/v1/sessions",
        status: 401,
      }),
    );
    expect(records).toContainEqual(
      expect.objectContaining({ level: "info", event: "run_ended", sessionKey: key, runId, status: "ok" }),
    );
    expect(records).toContainEqual(
      expect.objectContaining({
        level: "info",
        event: "delivery_attempt",
        sessionKey: key,
        webhookId: `reply:${runId}`,
        channel: "discord",
        attempt: 1,
        outcome: "delivered",
        status: 200,
      }),
    );
    expect(records).toContainEqual(expect.objectContaining({ event: "run_ended", sessionKey: target, status: "ok" }));
    expect(records).toContainEqual(
      expect.objectContaining({
        event: "run_ended",
        sessionKey: spawned.details.childSessionKey,
        runId: spawned.details.runId,
        status: "ok",
      }),
    );
    const failure = records.find((r) => r.event === "run_ended" && r.runId === failed.runId);
    expect(failure).toMatchObject({ level: "warn", sessionKey: key, status: "error" });
    expect(String(failure!.error)).toContain("Incorrect API key provided: [redacted]");
  });
});

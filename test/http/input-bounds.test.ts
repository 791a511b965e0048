import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { authLimiter } from "../../src/http/rate-limit";
import { call, enc } from "../helpers/http";

/**
 * Every number finite and bounded, every array bounded (docs/limits.md): out of range is a 400 naming
 * the field — or a documented clamp — and nothing is stored. Raw bodies carry what JSON.stringify
 * cannot (`1e400` parses to Infinity).
 */
beforeEach(() => {
  authLimiter.reset();
  setConfigOverride({
    agents: {
      defaults: { subagents: { allowAgents: ["*"] } },
      list: [{ id: "main", default: true }, { id: "research" }],
    },
  });
});

const raw = (path: string, body: string) => call("POST", path, body);
const registryCount = () => env.REGISTRY.getByName("registry:main").count();

describe("bounded numbers and arrays", () => {
  it("each tool field beyond its bound is a 400 naming it; nothing is created", async () => {
    const before = await registryCount();
    const cases: [string, string, string][] = [
      [
        "sessions_spawn",
        '{"task":"t","runTimeoutSeconds":1e308}',
        "runTimeoutSeconds: Too big: expected number to be <=2592000",
      ],
      [
        "sessions_spawn",
        '{"task":"t","runTimeoutSeconds":1e400}',
        "runTimeoutSeconds: Invalid input: expected number, received Infinity",
      ],
      [
        "sessions_spawn",
        '{"task":"t","timeoutSeconds":2592001}',
        "timeoutSeconds: Too big: expected number to be <=2592000",
      ],
      [
        "sessions_spawn",
        `{"task":"t","attachments":${JSON.stringify(new Array(51).fill({ name: "a", content: "b" }))}}`,
        "attachments: Too big: expected array to have <=50 items",
      ],
      [
        "sessions_send",
        '{"sessionKey":"main","message":"m","timeoutSeconds":86401}',
        "timeoutSeconds: Too big: expected number to be <=86400",
      ],
      [
        "sessions_send",
        '{"sessionKey":"main","message":"m","timeoutSeconds":-1e400}',
        "timeoutSeconds: Invalid input: expected number, received -Infinity",
      ],
      ["sessions_list", '{"activeMinutes":1e308}', "activeMinutes: Too big: expected number to be <=10000000"],
      ["sessions_list", '{"limit":1e400}', "limit: Invalid input: expected number, received Infinity"],
      [
        "sessions_list",
        `{"kinds":${JSON.stringify(new Array(257).fill("group"))}}`,
        "kinds: Too big: expected array to have <=256 items",
      ],
      [
        "sessions_history",
        '{"sessionKey":"main","before":1e300}',
        "before: Too big: expected number to be <=9007199254740991",
      ],
    ];
    for (const [tool, args, message] of cases) {
      const r = await raw("/tools/invoke", `{"tool":"${tool}","args":${args}}`);
      expect(r.status, `${tool} ${args.slice(0, 60)}`).toBe(400);
      expect(r.json).toEqual({ ok: false, error: { type: "invalid_request", message } });
    }
    expect(await registryCount()).toBe(before);
  });

  it("limit and messageLimit are clamped (documented), not refused", async () => {
    const r = await raw("/tools/invoke", '{"tool":"sessions_list","args":{"limit":1e300,"messageLimit":1e300}}');
    expect(r.status).toBe(200);
    expect(r.json.result.details.count).toBeLessThanOrEqual(200);
  });

  it("a cursor carrying a non-finite or unsafe number is a 400 naming cursor", async () => {
    for (const cursor of [
      btoa('[1e400,"agent:main:main"]'),
      btoa('[1e300,"agent:main:main"]'),
      btoa(`[1,"${"k".repeat(1100)}"]`),
    ]) {
      const r = await raw("/tools/invoke", JSON.stringify({ tool: "sessions_list", args: { cursor } }));
      expect(r.status).toBe(400);
      expect(r.json.error.message).toBe("cursor: not a cursor returned by a previous listing page");
      expect((await call("GET", `/v1/sessions?cursor=${encodeURIComponent(cursor)}`)).status).toBe(400);
    }
  });

  it("REST: threadId must be a safe integer or a string; a message with threadId 1e400 stores nothing", async () => {
    const key = `agent:main:${crypto.randomUUID().slice(0, 8)}`;
    const r = await raw(`/v1/sessions/${enc(key)}/messages`, '{"message":"x","channel":"telegram","threadId":1e400}');
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^threadId: /);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
  });

  it("/v1/runs/{id}/wait?timeoutMs: not an integer → 400; beyond 15 min → clamped", async () => {
    const sent = await call("POST", `/v1/sessions/${enc(`agent:main:${crypto.randomUUID().slice(0, 8)}`)}/messages`, {
      message: "hi",
    });
    for (const bad of ["1e400", "-1", "NaN", "1.5"]) {
      const r = await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.json.error.message).toMatch(/^timeoutMs: /);
    }
    const clamped = await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=99999999999999999999`);
    expect(clamped.status).toBe(200);
  });

  it("MCP: a JSON-RPC batch of more than 20 messages is a 400 and none of it runs", async () => {
    const batch = Array.from({ length: 21 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "ping" }));
    const r = await call("POST", "/mcp", batch, { headers: { Accept: "application/json, text/event-stream" } });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Batch too large: 21 messages (max 20)" },
    });
    const ok = await call("POST", "/mcp", batch.slice(0, 20), {
      headers: { Accept: "application/json, text/event-stream" },
    });
    expect(ok.status).toBe(200);
    expect(ok.json).toHaveLength(20);
  });
});

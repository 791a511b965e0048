import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { REDACTED } from "../../src/config/redact";
import { call, enc, MAIN_TOKEN, RESEARCH_TOKEN } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";

describe("GET /v1/config (the console's agents page)", () => {
  it("answers the effective config with every secret redacted, and the config warnings", async () => {
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo" },
        list: [
          { id: "main", default: true },
          { id: "hooked", runtime: { type: "webhook", url: "https://bot.example/run?token=abc123", secret: "s3cret" } },
        ],
      },
      models: {
        providers: {
          acme: { baseUrl: "https://user:pw@llm.example/v1", apiKey: "sk-live-123", models: [{ id: "m" }] },
        },
      },
      channels: { telegram: { outbound: { url: "https://hook.example/tg", secret: "whsec" } } },
      session: { maintenance: { mode: "enforce" } },
    });
    const res = await call("GET", "/v1/config");
    expect(res.status).toBe(200);
    const text = JSON.stringify(res.json);
    for (const secret of ["abc123", "s3cret", "sk-live-123", "pw@", "whsec"]) expect(text).not.toContain(secret);
    const cfg = res.json.config;
    expect(cfg.agents.entries.hooked.runtime).toEqual({
      type: "webhook",
      url: `https://bot.example/run?token=${REDACTED}`,
      secret: REDACTED,
    });
    expect(cfg.models.providers.acme.apiKey).toBe(REDACTED);
    expect(cfg.models.providers.acme.baseUrl).toBe("https://redacted@llm.example/v1");
    expect(cfg.channels.telegram).toEqual({ outbound: { url: "https://hook.example/tg", secret: REDACTED } });
    // Defaults are filled in: it is the configuration the Worker runs with, not the raw CONFIG.
    expect(cfg.session.mainKey).toBe("main");
    expect(res.json.warnings).toEqual(expect.arrayContaining([expect.stringContaining("maintenance")]));
  });

  it("is the operator's: an agent token gets a 403", async () => {
    const res = await call("GET", "/v1/config", undefined, { token: MAIN_TOKEN });
    expect(res.status).toBe(403);
    expect(res.json.error).toEqual({
      type: "forbidden",
      message: "Reading the configuration needs the operator token (GATEWAY_TOKEN)",
    });
  });
});

describe("GET /v1/sessions/{key}/runs", () => {
  it("lists a session's runs newest first with their status, texts cut at 1000 characters", async () => {
    const key = `agent:main:runs-${crypto.randomUUID().slice(0, 8)}`;
    const ids: string[] = [];
    for (const message of ["first", "x".repeat(1500)]) {
      const sent = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message });
      ids.push(sent.json.runId);
      await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`);
    }
    await quiesce();
    const res = await call("GET", `/v1/sessions/${enc(key)}/runs`);
    expect(res.status).toBe(200);
    expect(res.json.sessionKey).toBe(key);
    expect(res.json.count).toBe(2);
    expect(res.json.runs.map((r: any) => [r.runId, r.status, r.kind])).toEqual([
      [ids[1], "ok", "inbound"],
      [ids[0], "ok", "inbound"],
    ]);
    expect(res.json.runs[0].reply.length).toBe(1000);
    expect(res.json.runs[0].textTruncated).toBe(true);
    expect(res.json.runs[1].textTruncated).toBeUndefined();
    const limited = await call("GET", `/v1/sessions/${enc(key)}/runs?limit=1`);
    expect(limited.json.runs.map((r: any) => r.runId)).toEqual([ids[1]]);
    expect((await call("GET", `/v1/sessions/${enc(key)}/runs?limit=0`)).status).toBe(400);
  });

  it("is empty for a session never written, and another agent's token gets a 403", async () => {
    const res = await call("GET", `/v1/sessions/${enc("agent:main:never-written")}/runs`);
    expect(res.json).toEqual({ sessionKey: "agent:main:never-written", count: 0, runs: [] });
    const other = await call("GET", `/v1/sessions/${enc("agent:main:main")}/runs`, undefined, {
      token: RESEARCH_TOKEN,
    });
    expect(other.status).toBe(403);
  });
});

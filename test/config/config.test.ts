import { describe, expect, it } from "vitest";
import { parseConfig, setConfigOverride } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import { SwitchboardError } from "../../src/errors";
import { call, invoke } from "../helpers/http";

function ok(raw: unknown): Config {
  const c = parseConfig(raw);
  if (c instanceof SwitchboardError) throw new Error(`unexpected config error: ${c.message}`);
  return c;
}

describe('CONFIG schema (docs/contract.md, "Configuration")', () => {
  it("an empty document gets OpenClaw's defaults", () => {
    const c = ok({});
    expect(c.session).toMatchObject({
      mainKey: "main",
      scope: "per-sender",
      dmScope: "main",
      agentToAgent: { maxPingPongTurns: 5 },
    });
    expect(c.session.sendPolicy).toBeUndefined();
    expect(c.tools.sessions.visibility).toBeUndefined(); // resolved to "tree" by the visibility policy
    expect(c.tools.agentToAgent).toEqual({ enabled: false, allow: [] });
    expect(c.tools.sessions_spawn.attachments).toEqual({
      enabled: false,
      maxFiles: 50,
      maxFileBytes: 1_048_576,
      maxTotalBytes: 5_242_880,
      retainOnSessionKeep: false,
    });
    // No model and no OpenAI key for OpenClaw's default: the offline model (with a warning, test/runners/openclaw-models.test.ts).
    expect(c.agents.defaults.model).toBe("builtin/echo");
    expect(c.agents.defaults.timeoutSeconds).toBe(172_800);
    expect(c.agents.defaults.sandbox).toEqual({ mode: "off", sessionToolsVisibility: "spawned" });
    expect(c.agents.defaults.subagents).toMatchObject({
      maxSpawnDepth: 1,
      maxChildrenPerAgent: 5,
      runTimeoutSeconds: 0,
      archiveAfterMinutes: 60,
      announceTimeoutMs: 120_000,
      requireAgentId: false,
    });
    // Unset: 8 per agent in each agent's own lane; set, it is a gateway-wide cap (docs/subagent-lane.md).
    expect(c.agents.defaults.subagents.maxConcurrent).toBeUndefined();
    expect(c.agents.roster).toEqual([{ id: "main", default: true, runtime: { type: "model" } }]);
    expect(c.agents.defaultId).toBe("main");
    expect(c.models.providers).toEqual({});
    expect(c.channels).toEqual({});
  });

  it("mainKey is trimmed and lower-cased; model refs accept {primary}", () => {
    const c = ok({
      session: { mainKey: " Primary ", scope: "global" },
      agents: { defaults: { model: { primary: "builtin/echo" } }, list: [{ id: " Ops " }] },
    });
    expect(c.session.mainKey).toBe("primary");
    expect(c.session.scope).toBe("global");
    expect(c.agents.defaults.model).toBe("builtin/echo");
    expect(c.agents.roster[0].id).toBe("ops");
  });

  it("accepts the same document as a JSON object or as a JSON string", () => {
    const doc = {
      agents: { list: [{ id: "alpha", default: true }, { id: "beta" }] },
      tools: { sessions: { visibility: "all" } },
    };
    expect(ok(JSON.stringify(doc))).toEqual(ok(doc));
    expect(ok("")).toEqual(ok({}));
  });

  it("names the bad path of an invalid document", () => {
    const bad = (raw: unknown) => {
      const c = parseConfig(raw);
      expect(c).toBeInstanceOf(SwitchboardError);
      return (c as SwitchboardError).message;
    };
    expect(bad({ session: { agentToAgent: { maxPingPongTurns: "9" } } })).toContain(
      "session.agentToAgent.maxPingPongTurns",
    );
    expect(bad({ agents: { entries: { main: { model: 42 } } } })).toContain("agents.entries.main.model");
    expect(bad({ models: { providers: { x: { baseUrl: 5 } } } })).toContain("models.providers.x.baseUrl");
    expect(bad({ session: { scope: "everyone" } })).toContain("session.scope");
    expect(bad("{not json")).toContain("not valid JSON");
    expect(bad("[1,2]")).toContain("expected a JSON object");
  });
});

describe("an invalid CONFIG at runtime", () => {
  it("answers every request with a 500 envelope naming the bad path, and recovers when fixed", async () => {
    setConfigOverride({ agents: { entries: { main: { model: 42 } } } });
    for (const [method, path, body] of [
      ["GET", "/healthz"],
      ["GET", "/v1/sessions"],
      ["POST", "/tools/invoke", { tool: "sessions_list" }],
      ["POST", "/v1/sessions/main/messages", { message: "hi" }],
      ["GET", "/no/such/route"],
    ] as const) {
      const r = await call(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(500);
      expect(r.json).toEqual({
        ok: false,
        error: { type: "config_error", message: expect.stringContaining("agents.entries.main.model") },
      });
    }
    // Unauthenticated requests get the same answer (config is checked first), not a crash.
    const anon = await call("GET", "/v1/agents", undefined, { token: null });
    expect(anon.status).toBe(500);

    setConfigOverride(JSON.stringify({ agents: { defaults: { model: "builtin/echo" }, entries: { main: {} } } }));
    const fixed = await call("GET", "/healthz");
    expect(fixed.status).toBe(200);
    expect(fixed.json).toEqual({ ok: true, agents: ["main"], warnings: [], archive: { bucket: true } });
  });

  it("a CONFIG given as a JSON string serves requests", async () => {
    setConfigOverride(
      JSON.stringify({ agents: { list: [{ id: "alpha", default: true, name: "Alpha" }, { id: "beta" }] } }),
    );
    const r = await invoke("agents_list");
    expect(r.status).toBe(200);
    expect(r.details).toEqual({
      requester: "alpha",
      allowAny: false,
      agents: [{ id: "alpha", name: "Alpha", configured: true }],
    });
  });

  it("the default config (wrangler.jsonc) has main (default) and research on builtin/echo", async () => {
    const r = await call("GET", "/v1/agents");
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      defaultAgentId: "main",
      agents: [
        {
          id: "main",
          name: "Main",
          default: true,
          model: "builtin/echo",
          sandboxed: false,
          sandbox: "off",
          runtime: "model",
          available: true,
        },
        {
          id: "research",
          name: "Research",
          default: false,
          model: "builtin/echo",
          sandboxed: false,
          sandbox: "off",
          runtime: "model",
          available: true,
        },
      ],
    });
  });
});

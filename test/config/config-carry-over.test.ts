import { describe, expect, it, vi } from "vitest";
import { configWarnings, parseConfig, setConfigOverride } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import { SwitchboardError } from "../../src/errors";
import { call, invoke, MAIN_TOKEN } from "../helpers/http";
import { baseConfig, HOOK_BASE, installFakes } from "../helpers/scripted";

/** Parse with the offline model named, so only carry-over warnings show (the default model's: test/runners/openclaw-models.test.ts). */
function ok(raw: any): { cfg: Config; warnings: string[] } {
  const model = raw.agents?.defaults?.model ?? raw.agent?.model ?? "builtin/echo";
  const c = parseConfig(
    raw.agent?.model ? raw : { ...raw, agents: { ...raw.agents, defaults: { ...raw.agents?.defaults, model } } },
  );
  if (c instanceof SwitchboardError) throw new Error(`unexpected config error: ${c.message}`);
  return { cfg: c, warnings: configWarnings(c) };
}
function bad(raw: unknown): string {
  const c = parseConfig(raw);
  expect(c).toBeInstanceOf(SwitchboardError);
  return (c as SwitchboardError).message;
}

describe("values OpenClaw accepts are clamped or mapped, never fatal", () => {
  it("maxPingPongTurns outside 0–5 is clamped (and floored), with a warning", () => {
    const high = ok({ session: { agentToAgent: { maxPingPongTurns: 9 } } });
    expect(high.cfg.session.agentToAgent.maxPingPongTurns).toBe(5);
    expect(high.warnings).toEqual(["session.agentToAgent.maxPingPongTurns: 9 clamped to 5 (range 0–5)"]);
    expect(ok({ session: { agentToAgent: { maxPingPongTurns: -3 } } }).cfg.session.agentToAgent.maxPingPongTurns).toBe(
      0,
    );
    expect(ok({ session: { agentToAgent: { maxPingPongTurns: 2.7 } } }).cfg.session.agentToAgent.maxPingPongTurns).toBe(
      2,
    );
    expect(ok({ session: { agentToAgent: { maxPingPongTurns: 3 } } }).warnings).toEqual([]);
    // A value of the wrong type is still invalid: the 500 names it.
    expect(bad({ session: { agentToAgent: { maxPingPongTurns: "many" } } })).toContain(
      "session.agentToAgent.maxPingPongTurns",
    );
  });

  it("announceTimeoutMs is clamped to 1..2,147,000,000", () => {
    const c = ok({ agents: { defaults: { subagents: { announceTimeoutMs: 9_999_999_999 } } } });
    expect(c.cfg.agents.defaults.subagents.announceTimeoutMs).toBe(2_147_000_000);
    expect(c.warnings).toEqual([
      "agents.defaults.subagents.announceTimeoutMs: 9999999999 clamped to 2147000000 (range 1–2147000000)",
    ]);
  });

  it("a gateway-wide maxConcurrent is clamped to 1..1,000 (the slot bank keeps a row per lease)", () => {
    const c = ok({ agents: { defaults: { subagents: { maxConcurrent: 5_000 } } } });
    expect(c.cfg.agents.defaults.subagents.maxConcurrent).toBe(1_000);
    expect(c.warnings).toEqual(["agents.defaults.subagents.maxConcurrent: 5000 clamped to 1000 (range 1–1000)"]);
    expect(ok({ agents: { defaults: { subagents: { maxConcurrent: 3 } } } }).warnings).toEqual([]);
  });

  it("the object form of channels.<ch>.threadBindings is accepted: spawning is on unless turned off (OpenClaw's spawnSessions)", () => {
    const c = ok({
      channels: {
        discord: {
          outbound: { url: "https://x.test/d" },
          threadBindings: { enabled: true, spawnSessions: true, idleHours: 24 },
        },
        slack: {
          outbound: { url: "https://x.test/s" },
          threadBindings: { enabled: true, spawnSubagentSessions: false },
        },
        telegram: { outbound: { url: "https://x.test/t" }, threadBindings: { enabled: false, spawnSessions: true } },
        matrix: { threadBindings: { enabled: true } },
      },
    });
    expect(c.cfg.channels.discord.threadBindings).toBe(true);
    expect(c.cfg.channels.slack.threadBindings).toBe(false);
    expect(c.cfg.channels.telegram.threadBindings).toBe(false);
    expect(c.cfg.channels.matrix.threadBindings).toBe(true);
    expect(c.warnings).toEqual([
      "channels.discord.threadBindings: object form mapped to true (ignored: idleHours)",
      "channels.slack.threadBindings: object form mapped to false",
      "channels.telegram.threadBindings: object form mapped to false",
      "channels.matrix.threadBindings: object form mapped to true",
    ]);
    // session.threadBindings.enabled: false turns every channel's bindings off.
    const off = ok({
      session: { threadBindings: { enabled: false } },
      channels: { discord: { threadBindings: true } },
    });
    expect(off.cfg.channels.discord.threadBindings).toBe(false);
    expect(off.warnings).toEqual([
      "session.threadBindings: spawning off applied to every channel (idle and age limits are not enforced)",
    ]);
  });

  it("legacy routing.* and agent.* keys are mapped to their current place; the current key wins", () => {
    const c = ok({
      routing: {
        agentToAgent: { enabled: true, allow: ["*"] },
        agents: { ops: { name: "Ops" }, dev: { model: "builtin/echo" } },
        defaultAgentId: "dev",
        sessions: { mainKey: "Home" },
        queue: { mode: "collect" },
      },
      agent: { model: { primary: "builtin/echo" }, timeoutSeconds: 120, workspace: "~/w" },
    });
    expect(c.cfg.tools.agentToAgent).toEqual({ enabled: true, allow: ["*"] });
    expect(c.cfg.agents.entries).toEqual({ ops: { name: "Ops" }, dev: { model: "builtin/echo", default: true } });
    expect(c.cfg.agents.defaultId).toBe("dev");
    expect(c.cfg.session.mainKey).toBe("home");
    expect(c.cfg.agents.defaults.model).toBe("builtin/echo");
    expect(c.cfg.agents.defaults.timeoutSeconds).toBe(120);
    expect(c.warnings).toEqual([
      "routing.agentToAgent: mapped to tools.agentToAgent",
      "routing.agents: mapped to agents.list",
      "routing.sessions.mainKey: mapped to session.mainKey",
      "routing.queue: ignored (not used by Switchboard)",
      "agent.model: mapped to agents.defaults.model",
      "agent.timeoutSeconds: mapped to agents.defaults.timeoutSeconds",
      "agent.workspace: ignored (not used by Switchboard)",
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
    ]);
    const both = ok({ session: { mainKey: "primary" }, routing: { sessions: { mainKey: "legacy" } } });
    expect(both.cfg.session.mainKey).toBe("primary");
    expect(both.warnings).toEqual(["routing.sessions.mainKey: ignored (session.mainKey is set and wins)"]);
  });

  it('provider api "openai" means openai-completions; an API we cannot speak drops that provider, not the gateway', () => {
    const c = ok({
      models: {
        providers: {
          legacy: { baseUrl: "https://llm.test/v1", api: "openai" },
          bed: { baseUrl: "https://bedrock.test", api: "bedrock-converse-stream" },
          claude: { api: "anthropic-messages", apiKey: "env:ANTHROPIC_KEY" },
        },
      },
    });
    expect(c.cfg.models.providers.legacy.api).toBe("openai-completions");
    expect(c.cfg.models.providers.bed).toBeUndefined();
    expect(c.cfg.models.providers.claude).toEqual({ api: "anthropic-messages", apiKey: "env:ANTHROPIC_KEY" });
    expect(c.warnings).toEqual([
      'models.providers.legacy.api: "openai" mapped to "openai-completions"',
      'models.providers.bed: ignored (api "bedrock-converse-stream" is not supported; use one of openai-completions, openai-responses, anthropic-messages, google-generative-ai)',
    ]);
    // A custom provider without a base URL cannot serve a model: the agents using it are named, the gateway runs.
    expect(
      ok({ agents: { defaults: { model: "x/m" } }, models: { providers: { x: { api: "openai-completions" } } } })
        .warnings,
    ).toEqual([
      'agents.defaults.model: agent "main" cannot run: invalid model: x/m (models.providers.x.baseUrl is required for a custom provider)',
    ]);
  });

  it('sandbox mode "non-main" is kept (main stays unsandboxed: test/config/openclaw-config.test.ts); send-policy values are read case-insensitively; model {primary} works for sub-agents', () => {
    const c = ok({
      agents: {
        defaults: {
          sandbox: { mode: "non-main" },
          subagents: { model: { primary: "builtin/echo", fallbacks: ["x/y"] } },
        },
        entries: { main: { sandbox: { mode: "non-main" }, subagents: { model: { primary: "builtin/echo" } } } },
      },
      session: {
        sendPolicy: { default: "Allow", rules: [{ action: "DENY", match: { channel: "discord", chatType: "dm" } }] },
      },
    });
    expect(c.cfg.agents.defaults.sandbox.mode).toBe("non-main");
    expect(c.cfg.agents.roster[0].sandbox).toEqual({ mode: "non-main" });
    expect(c.cfg.agents.defaults.subagents.model).toBe("builtin/echo");
    expect(c.cfg.agents.roster[0].subagents?.model).toBe("builtin/echo");
    expect(c.cfg.session.sendPolicy).toEqual({
      default: "allow",
      rules: [{ action: "deny", match: { channel: "discord", chatType: "direct" } }],
    });
    expect(c.warnings).toEqual([
      'session.sendPolicy.default: "Allow" mapped to "allow"',
      'session.sendPolicy.rules.0.action: "DENY" mapped to "deny"',
      'session.sendPolicy.rules.0.match.chatType: "dm" mapped to "direct"',
      "agents.defaults.subagents.model.fallbacks: ignored (not used by Switchboard)",
    ]);
  });

  it("keys Switchboard does not use are listed, grouped by the object holding them, known keys are not", () => {
    const c = ok({
      gateway: { port: 18789 },
      session: { maintenance: { mode: "warn" }, mainKey: "main" },
      agents: {
        defaults: { workspace: "~/w", subagents: { maxSpawnDepth: 2 } },
        list: [{ id: "main", identity: { name: "M" }, runtime: { type: "webhook", url: "https://a.test", extra: 1 } }],
      },
      channels: { telegram: { outbound: { url: "https://x.test/t" }, botToken: "secret", dmPolicy: "pairing" } },
    });
    expect(c.warnings).toEqual([
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
      "gateway: ignored (not used by Switchboard)",
      "session.maintenance: ignored (not used by Switchboard)",
      "agents.defaults.workspace: ignored (not used by Switchboard)",
      "agents.entries.main.identity: ignored (not used by Switchboard)",
      "agents.entries.main.runtime.extra: ignored (not used by Switchboard)",
      "channels.telegram.{botToken, dmPolicy}: ignored (not used by Switchboard)",
    ]);
    // Never cut: 80 unknown top-level keys are one line naming all 80.
    const many = ok(Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`k${i}`, i])));
    expect(many.warnings).toHaveLength(1);
    expect(many.warnings[0]).toBe(
      `{${Array.from({ length: 80 }, (_, i) => `k${i}`).join(", ")}}: ignored (not used by Switchboard)`,
    );
  });
});

describe("legacy send-policy match.provider (a security fix)", () => {
  function policy(sendPolicy: unknown) {
    setConfigOverride(
      baseConfig({
        session: { agentToAgent: { maxPingPongTurns: 0 }, sendPolicy },
        channels: {
          telegram: { outbound: { url: `${HOOK_BASE}/tg` } },
          discord: { outbound: { url: `${HOOK_BASE}/dc` } },
        },
      }),
    );
  }

  it("a deny rule on provider discord denies discord and only discord (it used to deny every channel)", async () => {
    policy({ rules: [{ action: "deny", match: { provider: "discord", chatType: "group" } }] });
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "fine"));
    const tg = await invoke("sessions_send", {
      sessionKey: "agent:main:telegram:group:carry-1",
      message: "hi",
      timeoutSeconds: 10,
    });
    expect(tg.details).toMatchObject({ status: "ok", reply: "fine" });
    const dc = await invoke("sessions_send", {
      sessionKey: "agent:main:discord:group:carry-1",
      message: "hi",
      timeoutSeconds: 10,
    });
    expect(dc.details).toMatchObject({ status: "error", error: "send blocked by session policy" });
    const h = await call("GET", "/healthz");
    expect(h.json.warnings).toEqual([
      "session.sendPolicy.rules.0.match.provider: mapped to session.sendPolicy.rules.0.match.channel",
    ]);
  });

  it("an unknown matcher fails the config, naming it, instead of widening the rule", async () => {
    policy({ rules: [{ action: "deny", match: { peer: "someone" } }] });
    const r = await call("GET", "/healthz");
    expect(r.status).toBe(500);
    expect(r.json.error.message).toContain("session.sendPolicy.rules.0.match");
    expect(r.json.error.message).toContain("peer");
  });
});

describe("GET /healthz warnings", () => {
  it("the operator sees what was mapped or ignored; others see liveness only; the log says it once", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { main: {} } },
      session: { agentToAgent: { maxPingPongTurns: 7 } },
      gateway: { bind: "lan" },
    });
    const op = await call("GET", "/healthz");
    expect(op.status).toBe(200);
    expect(op.json).toEqual({
      ok: true,
      agents: ["main"],
      warnings: [
        "session.agentToAgent.maxPingPongTurns: 7 clamped to 5 (range 0–5)",
        "gateway: ignored (not used by Switchboard)",
      ],
      archive: { bucket: true },
    });
    expect((await call("GET", "/healthz", undefined, { token: null })).json).toEqual({ ok: true, agents: ["main"] });
    expect((await call("GET", "/healthz", undefined, { token: MAIN_TOKEN })).json).toEqual({
      ok: true,
      agents: ["main"],
    });
    await call("GET", "/v1/agents");
    const logged = warn.mock.calls.filter((c) => String(c[0]).includes('"event":"config_warnings"'));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(String(logged[0][0]))).toEqual({
      level: "warn",
      event: "config_warnings",
      count: 2,
      warnings: [
        "session.agentToAgent.maxPingPongTurns: 7 clamped to 5 (range 0–5)",
        "gateway: ignored (not used by Switchboard)",
      ],
    });
  });
});

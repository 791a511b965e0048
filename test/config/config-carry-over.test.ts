import { describe, expect, it, vi } from "vitest";
import { configWarnings, parseConfig, setConfigOverride } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import { SwitchboardError } from "../../src/errors";
import { call, invoke, MAIN_TOKEN } from "../helpers/http";
import { baseConfig, HOOK_BASE, installFakes } from "../helpers/scripted";

function ok(raw: unknown): { cfg: Config; warnings: string[] } {
  const c = parseConfig(raw);
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

  it("the object form of channels.<ch>.threadBindings is accepted: spawnSubagentSessions opts the channel in", () => {
    const c = ok({
      channels: {
        discord: {
          webhookUrl: "https://x.test/d",
          threadBindings: { enabled: true, spawnSubagentSessions: true, idleHours: 24 },
        },
        slack: { webhookUrl: "https://x.test/s", threadBindings: { enabled: true } },
        telegram: { webhookUrl: "https://x.test/t", threadBindings: { enabled: false, spawnSubagentSessions: true } },
      },
    });
    expect(c.cfg.channels.discord.threadBindings).toBe(true);
    expect(c.cfg.channels.slack.threadBindings).toBe(false);
    expect(c.cfg.channels.telegram.threadBindings).toBe(false);
    expect(c.warnings).toEqual([
      "channels.discord.threadBindings: object form mapped to true (ignored: idleHours)",
      "channels.slack.threadBindings: object form mapped to false",
      "channels.telegram.threadBindings: object form mapped to false",
    ]);
    // session.threadBindings.enabled: false turns every channel's bindings off.
    const off = ok({
      session: { threadBindings: { enabled: false } },
      channels: { discord: { threadBindings: true } },
    });
    expect(off.cfg.channels.discord.threadBindings).toBe(false);
    expect(off.warnings).toEqual([
      "session.threadBindings: enabled: false applied to every channel (idle and age limits are not enforced)",
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
    expect(c.cfg.agents.list).toEqual([
      { id: "ops", name: "Ops" },
      { id: "dev", model: "builtin/echo", default: true },
    ]);
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
    // openai-completions has no default endpoint: baseUrl stays required, named in the 500.
    expect(bad({ models: { providers: { x: { api: "openai-completions" } } } })).toContain(
      "models.providers.x.baseUrl",
    );
  });

  it('sandbox mode "non-main" maps to the safe side; send-policy values are read case-insensitively; model {primary} works for sub-agents', () => {
    const c = ok({
      agents: {
        defaults: {
          sandbox: { mode: "non-main" },
          subagents: { model: { primary: "builtin/echo", fallbacks: ["x/y"] } },
        },
        list: [{ id: "main", sandbox: { mode: "non-main" }, subagents: { model: { primary: "builtin/echo" } } }],
      },
      session: {
        sendPolicy: { default: "Allow", rules: [{ action: "DENY", match: { channel: "discord", chatType: "dm" } }] },
      },
    });
    expect(c.cfg.agents.defaults.sandbox.mode).toBe("all");
    expect(c.cfg.agents.list[0].sandbox).toEqual({ mode: "all" });
    expect(c.cfg.agents.defaults.subagents.model).toBe("builtin/echo");
    expect(c.cfg.agents.list[0].subagents?.model).toBe("builtin/echo");
    expect(c.cfg.session.sendPolicy).toEqual({
      default: "allow",
      rules: [{ action: "deny", match: { channel: "discord", chatType: "direct" } }],
    });
    expect(c.warnings).toEqual([
      'session.sendPolicy.default: "Allow" mapped to "allow"',
      'session.sendPolicy.rules.0.action: "DENY" mapped to "deny"',
      'session.sendPolicy.rules.0.match.chatType: "dm" mapped to "direct"',
      'agents.defaults.sandbox.mode: "non-main" mapped to "all" (sandboxing is per agent here, so main is sandboxed too)',
      'agents.list.0.sandbox.mode: "non-main" mapped to "all" (sandboxing is per agent here, so main is sandboxed too)',
      "agents.defaults.subagents.model.fallbacks: ignored (not used by Switchboard)",
    ]);
  });

  it("keys Switchboard does not use are listed (bounded), known keys are not", () => {
    const c = ok({
      gateway: { port: 18789 },
      session: { maintenance: { mode: "warn" }, mainKey: "main" },
      agents: {
        defaults: { workspace: "~/w", subagents: { maxSpawnDepth: 2 } },
        list: [{ id: "main", identity: { name: "M" }, runtime: { type: "webhook", url: "https://a.test", extra: 1 } }],
      },
      channels: { telegram: { webhookUrl: "https://x.test/t", botToken: "secret" } },
    });
    expect(c.warnings).toEqual([
      "gateway: ignored (not used by Switchboard)",
      "session.maintenance: ignored (not used by Switchboard)",
      "agents.defaults.workspace: ignored (not used by Switchboard)",
      "agents.list.0.identity: ignored (not used by Switchboard)",
      "agents.list.0.runtime.extra: ignored (not used by Switchboard)",
      "channels.telegram.botToken: ignored (not used by Switchboard)",
    ]);
    const many = ok(Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`k${i}`, i])));
    expect(many.warnings).toHaveLength(51);
    expect(many.warnings[50]).toBe("… and 30 more ignored keys");
  });
});

describe("legacy send-policy match.provider (a security fix)", () => {
  function policy(sendPolicy: unknown) {
    setConfigOverride(
      baseConfig({
        session: { agentToAgent: { maxPingPongTurns: 0 }, sendPolicy },
        channels: { telegram: { webhookUrl: `${HOOK_BASE}/tg` }, discord: { webhookUrl: `${HOOK_BASE}/dc` } },
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
      agents: { list: [{ id: "main", default: true }] },
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

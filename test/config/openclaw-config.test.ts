// biome-ignore-all lint/suspicious/noTemplateCurlyInString: OpenClaw configs write ${VAR} references literally; these strings are configs.
import { runInDurableObject } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { SessionObject } from "../../src/session/session-object";
import { fakeWire } from "../helpers/fake-wire";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { HOOK_BASE, installFakes, MODEL_BASE, until } from "../helpers/scripted";

/**
 * An OpenClaw 2026 config as its users write it (docs/openclaw-carry-over.md): agents keyed under
 * `agents.entries`, SecretRefs and `${VAR}` wherever OpenClaw resolves them, runtimes this gateway cannot
 * run, and keys that mean what they mean in OpenClaw (Telegram's inbound webhook, thinkingDefault,
 * sandbox "non-main", the run timeout).
 */

const uid = () => crypto.randomUUID().slice(0, 8);
const FAKE = { fake: { baseUrl: MODEL_BASE, apiKey: "k" } };

async function healthz(): Promise<{ agents: string[]; warnings: string[] }> {
  const h = await call("GET", "/healthz");
  expect(h.status).toBe(200);
  return h.json;
}

describe("agents as OpenClaw 2026 writes them", () => {
  it("agents.entries: every agent is served on its own model; the system agent is the default", async () => {
    const home = `home${uid()}`;
    const work = `work${uid()}`;
    setConfigOverride({
      agents: {
        ownership: "explicit",
        defaults: { model: "fake/m1", systemAgent: { agentId: home } },
        entries: { [home]: { name: "Home" }, [work]: { model: "builtin/echo" } },
      },
      models: { providers: FAKE },
    });
    installFakes(() => "from the model");
    expect(await healthz()).toEqual({ ok: true, agents: [home, work], warnings: [], archive: { bucket: true } });
    const agents = (await call("GET", "/v1/agents")).json;
    expect(agents.defaultAgentId).toBe(home);
    expect(agents.agents.map((a: any) => [a.id, a.model, a.default])).toEqual([
      [home, "fake/m1", true],
      [work, "builtin/echo", false],
    ]);
    // `main` is the default agent's main session; each agent runs on its own model.
    const r = await call("POST", "/v1/sessions/main/messages", { message: "hi" });
    expect(r.json.sessionKey ?? `agent:${home}:main`).toBe(`agent:${home}:main`);
    expect((await call("GET", `/v1/runs/${r.json.runId}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "ok",
      reply: "from the model",
    });
    expect(await sendAndWait(`agent:${work}:main`, "echo me")).toMatchObject({ status: "ok", reply: "echo me" });
  });

  it("the legacy agents.list is read as agents.entries (ids normalised, duplicates moved aside), with a warning", async () => {
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo" },
        list: [{ id: "Main", default: true }, { id: "ops" }, { id: "OPS" }],
      },
    });
    const h = await healthz();
    expect(h.agents).toEqual(["main", "ops", "ops-2"]);
    expect(h.warnings).toEqual([
      'agents.list.0.id: "Main" read as "main"',
      'agents.list.2.id: "OPS" read as "ops"',
      'agents.list.2.id: duplicate "ops" moved to agents.entries.ops-2',
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
    ]);
    // Both forms: agents.entries wins, as in OpenClaw's migration.
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { solo: {} }, list: [{ id: "other" }] },
    });
    expect(await healthz()).toMatchObject({
      agents: ["solo"],
      warnings: ["agents.list: ignored (agents.entries is set and wins)"],
    });
  });

  it("a roster without an owner: the legacy default marker, else the first entry with a warning", async () => {
    setConfigOverride({ agents: { defaults: { model: "builtin/echo" }, entries: { a: {}, b: { default: true } } } });
    expect((await call("GET", "/v1/agents")).json.defaultAgentId).toBe("b");
    expect((await healthz()).warnings).toEqual([]);
    setConfigOverride({ agents: { defaults: { model: "builtin/echo" }, entries: { a: {}, b: {} } } });
    expect((await call("GET", "/v1/agents")).json.defaultAgentId).toBe("a");
    expect((await healthz()).warnings).toEqual([
      'agents.entries: 2 agents and no default (set agents.defaults.systemAgent.agentId, or default: true on one entry); "main" and un-prefixed session keys go to the first, "a"',
    ]);
  });

  it("/healthz names every ignored key, grouped by the object holding them, never cut", async () => {
    const filler = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`extra${i}`, i]));
    setConfigOverride({
      ...filler,
      gateway: { port: 18789, auth: { token: "t" } },
      hooks: { enabled: true },
      skills: { entries: {} },
      memory: { backend: "builtin" },
      agents: {
        defaults: { model: "builtin/echo", workspace: "~/w", heartbeat: {} },
        entries: { main: { identity: {} } },
      },
    });
    const { warnings } = await healthz();
    const all = warnings.join("\n");
    for (const key of ["gateway", "hooks", "skills", "memory", "extra0", "extra59"]) expect(all).toContain(key);
    expect(all).not.toContain("more ignored keys");
    expect(warnings).toEqual([
      `{${[...Object.keys(filler), "gateway", "hooks", "skills", "memory"].join(", ")}}: ignored (not used by Switchboard)`,
      "agents.defaults.{workspace, heartbeat}: ignored (not used by Switchboard)",
      "agents.entries.main.identity: ignored (not used by Switchboard)",
    ]);
  });
});

describe("values OpenClaw accepts never take the gateway down", () => {
  it("SecretRef apiKey: source env is read; file and exec are refused with a warning, the gateway stays up", async () => {
    const agent = `s${uid()}`;
    setConfigOverride(
      {
        secrets: { providers: { vault: { source: "exec", command: "/bin/vault" } } },
        agents: { defaults: { model: "custom/m1" }, entries: { [agent]: {} } },
        models: {
          providers: {
            custom: {
              baseUrl: "https://secret.test/v1",
              apiKey: { source: "env", provider: "default", id: "CUSTOM_KEY" },
              models: [{ id: "m1", name: "M1" }],
            },
            other: { baseUrl: "https://other.test/v1", apiKey: { source: "exec", provider: "vault", id: "x/y" } },
            third: { baseUrl: "https://third.test/v1", apiKey: { source: "file", provider: "f", id: "/k" } },
          },
        },
      },
      { env: { CUSTOM_KEY: "from-secret-ref" } },
    );
    const calls = fakeWire("openai-completions", () => ({ text: "ok" }), undefined, "https://secret.test/v1");
    expect((await healthz()).warnings).toEqual([
      'models.providers.other.apiKey: SecretRef source "exec" is not supported (only "env": store the value as a Worker secret and use {source: "env", provider: "default", id: "<NAME>"}); the value is unset',
      'models.providers.third.apiKey: SecretRef source "file" is not supported (only "env": store the value as a Worker secret and use {source: "env", provider: "default", id: "<NAME>"}); the value is unset',
      "secrets: ignored (not used by Switchboard)",
    ]);
    expect(await sendAndWait(`agent:${agent}:main`, "hi")).toMatchObject({ status: "ok", reply: "ok" });
    expect(calls[0].headers.authorization).toBe("Bearer from-secret-ref");
  });

  it("${VAR} is substituted in every string (URLs and secrets); an outbound secret signs with the variable's value", async () => {
    const agent = `v${uid()}`;
    setConfigOverride(
      {
        agents: { defaults: { model: "fake/m1" }, entries: { [agent]: {} } },
        models: { providers: { fake: { baseUrl: "${LLM_BASE}", apiKey: "k" } } },
        channels: {
          discord: { webhookUrl: "${HOOK_BASE_URL}/discord", webhookSecret: "${HOOK_SECRET}" },
          slack: {
            outbound: { url: `${HOOK_BASE}/slack`, secret: { source: "env", provider: "default", id: "HOOK_SECRET" } },
          },
          webchat: { outbound: { url: `${HOOK_BASE}/literal`, secret: "$${HOOK_SECRET}" } },
        },
      },
      { env: { LLM_BASE: MODEL_BASE, HOOK_BASE_URL: HOOK_BASE, HOOK_SECRET: "hook-secret-from-env" } },
    );
    const fakes = installFakes(() => "signed reply");
    expect((await healthz()).warnings).toEqual([
      "channels.discord.{webhookUrl, webhookSecret}: mapped to channels.discord.outbound.{url, secret}",
    ]);
    const receiver = (secret: string) => new Webhook(new TextEncoder().encode(secret), { format: "raw" });
    for (const channel of ["discord", "slack"]) {
      await sendAndWait(`agent:${agent}:${channel}:direct:u${uid()}`, "hi", { channel, to: "u", deliver: true });
      await until(async () => expect(fakes.hooks.find((h) => h.url.endsWith(`/${channel}`))).toBeDefined());
      const hook = fakes.hooks.find((h) => h.url.endsWith(`/${channel}`))!;
      expect(receiver("hook-secret-from-env").verify(hook.rawBody, hook.headers)).toMatchObject({
        message: "signed reply",
      });
      expect(() => receiver("${HOOK_SECRET}").verify(hook.rawBody, hook.headers)).toThrow();
    }
    // `$${NAME}` is the literal text `${NAME}`.
    await sendAndWait(`agent:${agent}:webchat:direct:u${uid()}`, "hi", { channel: "webchat", to: "u", deliver: true });
    await until(async () => expect(fakes.hooks.find((h) => h.url.endsWith("/literal"))).toBeDefined());
    const literal = fakes.hooks.find((h) => h.url.endsWith("/literal"))!;
    expect(receiver("${HOOK_SECRET}").verify(literal.rawBody, literal.headers)).toMatchObject({
      message: "signed reply",
    });
  });

  it('an agent with runtime.type "acp" is listed unavailable; its sessions refuse by name; the rest of the gateway runs', async () => {
    const codex = `codex${uid()}`;
    const main = `main${uid()}`;
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo", systemAgent: { agentId: main }, subagents: { allowAgents: ["*"] } },
        entries: {
          [main]: {},
          [codex]: { runtime: { type: "acp", acp: { agent: "codex", backend: "acpx", mode: "persistent" } } },
          odd: { runtime: { type: "harness-x" } },
        },
      },
      tools: { agentToAgent: { enabled: true }, sessions: { visibility: "all" } },
    });
    const h = await healthz();
    expect(h.agents).toEqual([main, codex, "odd"]);
    expect(h.warnings).toEqual([
      `agents.entries.${codex}.runtime.type: "acp" is not supported (an ACP harness (an external coding agent) runs outside this gateway); agent "${codex}" is unavailable: messages to its sessions are refused`,
      'agents.entries.odd.runtime.type: "harness-x" is not supported (it is not a runtime this gateway knows (embedded, webhook)); agent "odd" is unavailable: messages to its sessions are refused',
    ]);
    const listed = (await call("GET", "/v1/agents")).json.agents.find((a: any) => a.id === codex);
    expect(listed).toMatchObject({ runtime: "acp", available: false });
    const refusal = `Agent "${codex}" is unavailable: its runtime type "acp" is not supported by this gateway (see GET /healthz warnings)`;
    const r = await call("POST", `/v1/sessions/${enc(`agent:${codex}:main`)}/messages`, { message: "hi" });
    expect(r.status).toBe(409);
    expect(r.json).toEqual({ ok: false, error: { type: "conflict", message: refusal } });
    expect((await call("GET", `/v1/sessions/${enc(`agent:${codex}:main`)}`)).status).toBe(404); // nothing was stored
    const send = await invoke("sessions_send", { sessionKey: `agent:${codex}:main`, message: "hi", timeoutSeconds: 5 });
    expect(send.details).toMatchObject({ status: "error", error: refusal });
    const spawn = await invoke("sessions_spawn", { task: "t", agentId: codex });
    expect(spawn.details).toEqual({ status: "error", error: refusal });
    // The default agent still answers.
    expect(await sendAndWait("main", "still here")).toMatchObject({ status: "ok", reply: "still here" });
  });
});

describe("keys mean what they mean in OpenClaw", () => {
  it("channels.telegram.webhookUrl/webhookSecret are OpenClaw's inbound webhook: not used for replies; outbound.url is", async () => {
    const agent = `t${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "fake/m1" }, entries: { [agent]: {} } },
      models: { providers: FAKE },
      channels: {
        telegram: { webhookUrl: `${HOOK_BASE}/telegram-webhook`, webhookSecret: "inbound-secret", botToken: "b" },
        zalo: { webhookUrl: `${HOOK_BASE}/zalo`, outbound: { url: `${HOOK_BASE}/zalo-out` } },
      },
    });
    const fakes = installFakes(() => "reply");
    expect((await healthz()).warnings).toEqual([
      "channels.telegram.{webhookUrl, webhookSecret}: ignored (OpenClaw's inbound webhook for telegram; this gateway receives messages at POST /v1/sessions/{key}/messages and delivers replies to channels.telegram.outbound.url)",
      "channels.zalo.webhookUrl: ignored (OpenClaw's inbound webhook for zalo; this gateway receives messages at POST /v1/sessions/{key}/messages and delivers replies to channels.zalo.outbound.url)",
      "channels.telegram.botToken: ignored (not used by Switchboard)",
    ]);
    const tg = `agent:${agent}:telegram:direct:u1`;
    await sendAndWait(tg, "hi", { channel: "telegram", to: "u1", deliver: true });
    await until(async () =>
      expect((await call("GET", `/v1/sessions/${enc(tg)}/deliveries?status=dead`)).json.deliveries).toHaveLength(1),
    );
    const zalo = `agent:${agent}:zalo:direct:u1`;
    await sendAndWait(zalo, "hi", { channel: "zalo", to: "u1", deliver: true });
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.hooks.map((h) => h.url)).toEqual([`${HOOK_BASE}/zalo-out`]);
  });

  it("thinkingDefault reaches the model; the old `thinking` key is mapped; a typo is a warning, not silently no thinking", async () => {
    const a = `k${uid()}`;
    const b = `k${uid()}`;
    setConfigOverride({
      agents: {
        defaults: { model: "custom/m1", thinking: "low" },
        entries: { [a]: { default: true, thinkingDefault: "X-High" }, [b]: { thinkingDefault: "hgih" } },
      },
      models: { providers: { custom: { baseUrl: "https://think.test/v1" } } },
    });
    const calls = fakeWire("openai-completions", () => ({ text: "thought" }), undefined, "https://think.test/v1");
    expect((await healthz()).warnings).toEqual([
      "agents.defaults.thinking: mapped to agents.defaults.thinkingDefault",
      `agents.entries.${a}.thinkingDefault: "X-High" mapped to "xhigh"`,
      `agents.entries.${b}.thinkingDefault: "hgih" is not a thinking level (off, minimal, low, medium, high, xhigh, adaptive, max, ultra); ignored, agents.defaults.thinkingDefault applies`,
    ]);
    await sendAndWait(`agent:${a}:main`, "x");
    await sendAndWait(`agent:${b}:main`, "x");
    expect(calls.map((c) => c.body.reasoning_effort)).toEqual(["high", "low"]);
  });

  it("a sub-agent thinking default that is no level is named when the config loads", async () => {
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo", subagents: { thinking: "deep" } }, entries: { main: {} } },
    });
    expect((await healthz()).warnings).toEqual([
      'agents.defaults.subagents.thinking: Invalid thinking level "deep". Use one of: off, minimal, low, medium, high, xhigh, adaptive, max, ultra. Ignored: a sub-agent gets no thinking level unless sessions_spawn names one',
    ]);
  });

  it("\"adaptive\" is provider-managed thinking: Anthropic's adaptive mode, Gemini's dynamic budget", async () => {
    const agent = `k${uid()}`;
    setConfigOverride(
      {
        agents: {
          defaults: { model: "anthropic/claude-opus-5", thinkingDefault: "adaptive" },
          entries: { [agent]: {} },
        },
      },
      { env: { ANTHROPIC_API_KEY: "a" } },
    );
    const calls = fakeWire("anthropic-messages", () => ({ text: "t" }), undefined, "https://api.anthropic.com/v1");
    await sendAndWait(`agent:${agent}:main`, "x");
    expect(calls[0].body.thinking).toEqual({ type: "adaptive" });
  });

  it('sandbox mode "non-main" leaves the main session unsandboxed and sandboxes every other session of the agent', async () => {
    const agent = `n${uid()}`;
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo", sandbox: { mode: "non-main" }, subagents: { allowAgents: ["*"] } },
        entries: { [agent]: {}, open: { sandbox: { mode: "off" } } },
      },
      tools: { sessions: { visibility: "agent" } },
    });
    const main = `agent:${agent}:main`;
    const group = `agent:${agent}:discord:group:g1`;
    await sendAndWait(main, "a");
    await sendAndWait(group, "b");
    const keys = async (sessionKey: string) =>
      (await invoke("sessions_list", {}, { sessionKey })).details.sessions.map((s: any) => s.key).sort();
    // Main keeps its configured visibility (the agent's sessions); the group session is clamped to its own tree.
    expect(await keys(main)).toEqual([group, main].sort());
    expect(await keys(group)).toEqual([group]);
    // Sandboxed sessions may only spawn sandboxed children; main may spawn anywhere allowed.
    expect((await invoke("sessions_spawn", { task: "t", agentId: "open" }, { sessionKey: main })).details.status).toBe(
      "accepted",
    );
    expect(
      (await invoke("sessions_spawn", { task: "t", agentId: "open" }, { sessionKey: group })).details,
    ).toMatchObject({
      status: "forbidden",
      error: expect.stringContaining("Sandboxed sessions cannot spawn unsandboxed subagents"),
    });
    const listed = (await call("GET", "/v1/agents")).json.agents.find((a: any) => a.id === agent);
    expect(listed).toMatchObject({ sandbox: "non-main", sandboxed: true });
  });

  it("agents.defaults.timeoutSeconds defaults to OpenClaw's 48 h; 0 means no deadline", async () => {
    const deadlineOf = async (key: string, runId: string) =>
      runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
        const t = obj.timers.get("deadline", runId);
        const started = (obj.runRow(runId) as { started_at: number | null } | null)?.started_at ?? null;
        return t && started !== null ? t.due_at - started : null;
      });
    let hold = true;
    setConfigOverride({ agents: { defaults: { model: "fake/m1" }, entries: { d: {} } }, models: { providers: FAKE } });
    installFakes(async () => {
      while (hold) await new Promise((r) => setTimeout(r, 5));
      return "done";
    });
    const key = `agent:d:t${uid()}`;
    const sent = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "x" });
    await until(async () => expect(await deadlineOf(key, sent.json.runId)).toBe(172_800_000));
    hold = false;
    await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`);

    hold = true;
    setConfigOverride({
      agents: { defaults: { model: "fake/m1", timeoutSeconds: 0 }, entries: { d: {} } },
      models: { providers: FAKE },
    });
    const key2 = `agent:d:t${uid()}`;
    const sent2 = await call("POST", `/v1/sessions/${enc(key2)}/messages`, { message: "x" });
    await until(async () => expect((await call("GET", `/v1/runs/${sent2.json.runId}`)).json.status).toBe("running"));
    expect(await deadlineOf(key2, sent2.json.runId)).toBeNull();
    hold = false;
    expect((await call("GET", `/v1/runs/${sent2.json.runId}/wait?timeoutMs=10000`)).json.status).toBe("ok");
  });
});

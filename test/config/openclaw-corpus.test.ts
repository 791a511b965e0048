// biome-ignore-all lint/suspicious/noTemplateCurlyInString: OpenClaw configs write ${VAR} references literally.
/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { fakeWire, type WireApi } from "../helpers/fake-wire";
import { call } from "../helpers/http";

/**
 * Real OpenClaw configurations from its documentation (test/fixtures/openclaw/, README there names each
 * page): every one starts the gateway, `/healthz` (operator) answers 200 with the warnings it should have,
 * and a message to the default agent's main session runs on a local fake of the configured provider's
 * wire format at the provider's own URL (keys come from the test's environment, as Worker secrets would).
 */

const FIXTURES = import.meta.glob("../fixtures/openclaw/*.json", { eager: true, import: "default" }) as Record<
  string,
  Record<string, unknown>
>;
const fixture = (name: string) => structuredClone(FIXTURES[`../fixtures/openclaw/${name}.json`]);

const OPENAI = { OPENAI_API_KEY: "sk-openai-from-env" };
const ANTHROPIC = { ANTHROPIC_API_KEY: "sk-ant-from-env" };

interface Wire {
  api: WireApi;
  base: string;
  /** The request URL the provider gets. */
  url: string;
  /** The model id it is asked for (not checked for Google, which names it in the URL). */
  model?: string;
  auth: [header: string, value: string];
}
const openai = (model = "gpt-6-astra", key = OPENAI.OPENAI_API_KEY): Wire => ({
  api: "openai-responses",
  base: "https://api.openai.com/v1",
  url: "https://api.openai.com/v1/responses",
  model,
  auth: ["authorization", `Bearer ${key}`],
});
const anthropic = (model: string, key = ANTHROPIC.ANTHROPIC_API_KEY): Wire => ({
  api: "anthropic-messages",
  base: "https://api.anthropic.com/v1",
  url: "https://api.anthropic.com/v1/messages",
  model,
  auth: ["x-api-key", key],
});

interface Case {
  file: string;
  env?: Record<string, string>;
  /** Placeholders of the doc replaced, where the doc's own would not run (`<your-resource>`). */
  redirect?: (doc: any) => void;
  /** The default agent, whose main session `main` is. */
  agent?: string;
  /** Where its run goes, or the refusal its sessions answer (an agent this gateway cannot run). */
  run: Wire | { refused: string };
  /** Warnings it must have, each exactly (others may be there: ignored keys are listed too). */
  warnings: string[];
  /** Text no warning may contain. */
  absent?: string[];
}

const IGNORED = "ignored (not used by Switchboard)";
const acpRefusal = (id: string) =>
  `Agent "${id}" is unavailable: its runtime type "acp" is not supported by this gateway (see GET /healthz warnings)`;
const acpWarning = (id: string) =>
  `agents.entries.${id}.runtime.type: "acp" is not supported (an ACP harness (an external coding agent) runs outside this gateway); agent "${id}" is unavailable: messages to its sessions are refused`;

const CASES: Case[] = [
  // Providers and keys.
  {
    file: "providers-anthropic-api-key",
    run: anthropic("claude-opus-5", "example-anthropic-key-not-real"),
    warnings: [],
  },
  { file: "providers-openai-setup-api-key", run: openai("gpt-6-astra", "example-openai-key-not-real"), warnings: [] },
  {
    file: "providers-google-gemini",
    env: { GEMINI_API_KEY: "gemini-from-env" },
    run: {
      api: "google-generative-ai",
      base: "https://generativelanguage.googleapis.com/v1beta",
      url: "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse",
      auth: ["x-goog-api-key", "gemini-from-env"],
    },
    warnings: [],
  },
  {
    file: "providers-openai-azure-partial-override",
    redirect: (d) => {
      d.models.providers.openai.baseUrl = d.models.providers.openai.baseUrl.replace("<your-resource>", "corpus");
    },
    run: {
      ...openai("gpt-6-astra", "<azure-openai-api-key>"),
      base: "https://corpus.openai.azure.com",
      url: "https://corpus.openai.azure.com/responses",
    },
    warnings: [],
  },
  {
    file: "gateway-config-tools-custom-providers",
    run: {
      api: "openai-completions",
      base: "http://localhost:4000/v1",
      url: "http://localhost:4000/v1/chat/completions",
      model: "llama-3.1-8b",
      auth: ["authorization", "Bearer LITELLM_KEY"],
    },
    warnings: [
      `models.providers.custom-proxy.models.0.{reasoning, input, maxTokens}: ${IGNORED}`,
      `models.providers.custom-proxy.models.0.cost.{cacheRead, cacheWrite}: ${IGNORED}`,
    ],
  },
  {
    file: "gateway-configuration-examples-anthropic-minimax-fallback",
    env: { ...ANTHROPIC, MINIMAX_API_KEY: "mm" },
    run: anthropic("claude-opus-4-6"),
    warnings: [`auth: ${IGNORED}`, `agents.defaults.model.fallbacks: ${IGNORED}`],
  },
  {
    file: "gateway-configuration-examples-local-models-only",
    run: {
      api: "openai-responses",
      base: "http://127.0.0.1:1234/v1",
      url: "http://127.0.0.1:1234/v1/responses",
      model: "my-local-model",
      auth: ["authorization", "Bearer lmstudio"],
    },
    warnings: [`agents.defaults.workspace: ${IGNORED}`],
  },
  {
    file: "gateway-config-agents-models",
    env: ANTHROPIC,
    run: anthropic("claude-opus-4-6"),
    warnings: [`agents.defaults.model.fallbacks: ${IGNORED}`],
  },
  {
    file: "gateway-configuration-environment-variables-substitution",
    env: { OPENCLAW_GATEWAY_TOKEN: "gw", CUSTOM_API_KEY: "custom-from-env" },
    run: {
      api: "openai-completions",
      base: "https://api.example.com/v1",
      url: "https://api.example.com/v1/chat/completions",
      model: "custom-model",
      auth: ["authorization", "Bearer custom-from-env"],
    },
    warnings: [`gateway: ${IGNORED}`],
  },
  // Secrets.
  {
    file: "gateway-configuration-environment-variables-secretrefs",
    env: OPENAI,
    run: openai(),
    warnings: [`{secrets, skills}: ${IGNORED}`, `channels.googlechat.serviceAccount: ${IGNORED}`],
    absent: ["SecretRef"],
  },
  {
    file: "gateway-secrets-integration-examples-vault-exec",
    env: OPENAI,
    run: openai("gpt-5"),
    warnings: [
      'models.providers.openai.apiKey: SecretRef source "exec" is not supported (only "env": store the value as a Worker secret and use {source: "env", provider: "default", id: "<NAME>"}); the value is unset',
    ],
  },
  {
    file: "gateway-secrets-secret-store-file-singlevalue",
    env: OPENAI,
    run: openai(),
    warnings: [
      'models.providers.xai.apiKey: SecretRef source "file" is not supported (only "env": store the value as a Worker secret and use {source: "env", provider: "default", id: "<NAME>"}); the value is unset',
    ],
  },
  // Channels.
  {
    file: "gateway-config-channels-telegram",
    env: OPENAI,
    run: openai(),
    warnings: [
      "channels.telegram.{webhookUrl, webhookSecret}: ignored (OpenClaw's inbound webhook for telegram; this gateway receives messages at POST /v1/sessions/{key}/messages and delivers replies to channels.telegram.outbound.url)",
    ],
  },
  {
    file: "gateway-config-channels-discord",
    env: OPENAI,
    run: openai(),
    warnings: [
      "channels.discord.threadBindings: object form mapped to true (ignored: idleHours, maxAgeHours, defaultSpawnContext)",
    ],
  },
  {
    file: "gateway-config-channels-slack",
    env: OPENAI,
    run: openai(),
    warnings: [expect.stringMatching(/^channels\.slack\.\{enabled, botToken, appToken, .*\}: ignored/) as never],
  },
  // Sandboxes and agents.
  {
    file: "tools-multi-agent-sandbox-tools-modes-per-agent",
    env: OPENAI,
    run: openai(),
    warnings: [`agents.defaults.sandbox.scope: ${IGNORED}`],
  },
  {
    file: "gateway-config-agents-sandbox",
    env: OPENAI,
    run: openai(),
    warnings: [
      `agents.defaults.sandbox.{backend, scope, workspaceAccess, workspaceRoot, docker, ssh, browser, prune}: ${IGNORED}`,
    ],
  },
  {
    file: "gateway-config-agents-access-profile-read-only",
    env: OPENAI,
    agent: "family",
    run: openai(),
    warnings: [`agents.entries.family.{workspace, tools}: ${IGNORED}`],
  },
  {
    file: "gateway-config-agents-multi-agent-routing",
    env: OPENAI,
    agent: "home",
    run: openai(),
    warnings: [`{bindings, talk}: ${IGNORED}`],
    absent: ["no default"],
  },
  {
    file: "legacy-agents-list-derived-from-configuration-examples-skill-baseline",
    env: OPENAI,
    run: openai(),
    warnings: [
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
    ],
  },
  {
    file: "legacy-agents-list-derived-from-multi-agent-sandbox-modes",
    env: OPENAI,
    run: openai(),
    warnings: [
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
    ],
  },
  // Runtimes this gateway cannot run: the agent is unavailable, the gateway is up.
  {
    file: "tools-acp-agents-bindings",
    env: OPENAI,
    agent: "codex",
    run: { refused: acpRefusal("codex") },
    warnings: [
      'agents.entries: 2 agents and no default (set agents.defaults.systemAgent.agentId, or default: true on one entry); "main" and un-prefixed session keys go to the first, "codex"',
      acpWarning("codex"),
      acpWarning("claude"),
      `bindings: ${IGNORED}`,
    ],
  },
  {
    file: "gateway-config-agents-entries-main",
    env: OPENAI,
    run: { refused: acpRefusal("main") },
    warnings: [acpWarning("main")],
  },
  // Sub-agents, agent-to-agent, compaction, the big examples.
  {
    file: "gateway-config-tools-subagents-defaults",
    env: OPENAI,
    run: openai(),
    // Its sub-agent model is MiniMax's, whose key this environment lacks: named, with what it means.
    warnings: [
      'agents.defaults.subagents.model: invalid model: minimax/MiniMax-M2.7 (no API key for provider "minimax" (set the Worker secret MINIMAX_CODE_PLAN_KEY or MINIMAX_CODING_API_KEY or MINIMAX_API_KEY, or models.providers.minimax.apiKey)); sessions_spawn without a model fails',
    ],
  },
  { file: "gateway-config-tools-agent-to-agent", env: OPENAI, run: openai(), warnings: [] },
  {
    file: "gateway-config-agents-compaction",
    env: OPENAI,
    run: openai(),
    warnings: [
      'agents.defaults.compaction.model: invalid model: openrouter/anthropic/claude-sonnet-4-6 (no API key for provider "openrouter" (set the Worker secret OPENROUTER_API_KEY, or models.providers.openrouter.apiKey)); compaction uses the session\'s model instead',
      `agents.defaults.compaction.{mode, provider, qualityGuard, midTurnPrecheck, postIndexSync, postCompactionSections, notifyUser, memoryFlush}: ${IGNORED}`,
    ],
  },
  {
    file: "gateway-configuration-examples-recommended-starter",
    env: ANTHROPIC,
    run: anthropic("claude-sonnet-4-6"),
    warnings: [`agents.entries.main.identity: ${IGNORED}`, `messages: ${IGNORED}`],
  },
  {
    file: "gateway-configuration-examples-expanded",
    env: ANTHROPIC,
    run: anthropic("claude-sonnet-4-6"),
    warnings: [
      `{auth, logging, messages, memory, cron, hooks, gateway, skills}: ${IGNORED}`,
      `session.{reset, resetByChannel, resetTriggers, store, maintenance}: ${IGNORED}`,
      `agents.defaults.model.fallbacks: ${IGNORED}`,
    ],
  },
];

describe("OpenClaw's documented configurations start, run, and say what they ignore", () => {
  it("the corpus is every fixture", () => {
    expect(CASES.map((c) => c.file).sort()).toEqual(
      Object.keys(FIXTURES)
        .map((k) => k.replace("../fixtures/openclaw/", "").replace(".json", ""))
        .sort(),
    );
  });

  it.each(CASES)("$file", async (c) => {
    const doc = fixture(c.file);
    c.redirect?.(doc);
    setConfigOverride(doc, { env: c.env });
    const answer = `answered for ${c.file}`;
    const wire = "api" in c.run ? c.run : null;
    const calls = wire ? fakeWire(wire.api, () => ({ text: answer }), undefined, wire.base) : [];

    const h = await call("GET", "/healthz");
    expect(h.status).toBe(200);
    expect(h.json.warnings).toEqual(expect.arrayContaining(c.warnings));
    if (c.warnings.length === 0) expect(h.json.warnings).toEqual([]);
    // A model that does not resolve is always named; none of these configs has one.
    for (const text of ["cannot run", "builtin/echo", ...(c.absent ?? [])])
      expect(h.json.warnings.filter((w: string) => w.includes(text))).toEqual([]);
    expect((await call("GET", "/v1/agents")).json.defaultAgentId).toBe(c.agent ?? "main");

    const sent = await call("POST", "/v1/sessions/main/messages", { message: "hello from the corpus" });
    if (!wire) {
      expect(sent.status).toBe(409);
      expect(sent.json.error.message).toBe((c.run as { refused: string }).refused);
      return;
    }
    expect(sent.status).toBe(202);
    const run = (await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`)).json;
    expect(run).toMatchObject({ status: "ok", reply: answer, sessionKey: `agent:${c.agent ?? "main"}:main` });
    expect(calls[0].url).toBe(wire.url);
    expect(calls[0].headers[wire.auth[0]]).toBe(wire.auth[1]);
    if (wire.model) expect(calls[0].body.model).toBe(wire.model);
  });

  it("the Azure example as written: its placeholder base URL is named on /healthz; the gateway still starts", async () => {
    setConfigOverride(fixture("providers-openai-azure-partial-override"), { env: OPENAI });
    const h = await call("GET", "/healthz");
    expect(h.status).toBe(200);
    expect(h.json.warnings).toEqual([
      "agents.defaults.model: not set, and OpenClaw's default openai/gpt-6-astra cannot run here (models.providers.openai.baseUrl is not a URL); agents without a model run on the offline builtin/echo",
    ]);
  });
});

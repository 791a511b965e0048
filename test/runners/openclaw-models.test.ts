// biome-ignore-all lint/suspicious/noTemplateCurlyInString: OpenClaw configs write ${VAR} references literally; these strings are configs.
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { fakeWire, type WireApi } from "../helpers/fake-wire";
import { call, enc, sendAndWait } from "../helpers/http";

/**
 * Model references as OpenClaw writes them (docs/models.md): the built-in provider catalogue with keys
 * from the environment, partial provider blocks, every apiKey form, aliases and bare ids — and an agent
 * whose model cannot resolve is named on /healthz when the config loads, not found out at its first run.
 */

const uid = () => crypto.randomUUID().slice(0, 8);

async function warnings(): Promise<string[]> {
  const h = await call("GET", "/healthz");
  expect(h.status).toBe(200);
  return h.json.warnings;
}

/** One message to the default agent's main session of a fresh agent id, answered by the fake. */
async function runOnce(agent: string): Promise<any> {
  return sendAndWait(`agent:${agent}:main`, "hello");
}

describe("built-in providers with keys from the environment", () => {
  const cases: [string, WireApi, string, string, Record<string, string>, (h: Record<string, string>) => void][] = [
    [
      "anthropic/claude-opus-5",
      "anthropic-messages",
      "https://api.anthropic.com/v1",
      "https://api.anthropic.com/v1/messages",
      { ANTHROPIC_API_KEY: "sk-ant-test" },
      (h) => expect(h["x-api-key"]).toBe("sk-ant-test"),
    ],
    [
      "openai/gpt-6-astra",
      "openai-responses",
      "https://api.openai.com/v1",
      "https://api.openai.com/v1/responses",
      { OPENAI_API_KEY: "sk-openai-test" },
      (h) => expect(h.authorization).toBe("Bearer sk-openai-test"),
    ],
    [
      "google/gemini-3.1-pro-preview",
      "google-generative-ai",
      "https://generativelanguage.googleapis.com/v1beta",
      "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse",
      { GOOGLE_API_KEY: "g-test" },
      (h) => expect(h["x-goog-api-key"]).toBe("g-test"),
    ],
    [
      "openrouter/moonshotai/kimi-k2",
      "openai-completions",
      "https://openrouter.ai/api/v1",
      "https://openrouter.ai/api/v1/chat/completions",
      { OPENROUTER_API_KEY: "or-test" },
      (h) => expect(h.authorization).toBe("Bearer or-test"),
    ],
  ];
  it.each(cases)(
    "%s runs on its API at its default URL with the key from the environment",
    async (model, api, base, url, env, auth) => {
      const agent = `m${uid()}`;
      setConfigOverride({ agents: { defaults: { model }, entries: { [agent]: {} } } }, { env });
      const calls = fakeWire(api, () => ({ text: `hi from ${model}` }), undefined, base);
      expect(await warnings()).toEqual([]);
      expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: `hi from ${model}` });
      expect(calls[0].url).toBe(url);
      auth(calls[0].headers);
      if (api !== "google-generative-ai") expect(calls[0].body.model).toBe(model.slice(model.indexOf("/") + 1));
    },
  );

  it("without its key the agent is named on /healthz, and its run fails with the same reason", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { [agent]: { model: "anthropic/claude-opus-5" } } },
    });
    const problem =
      'invalid model: anthropic/claude-opus-5 (no API key for provider "anthropic" (set the Worker secret ANTHROPIC_API_KEY, or models.providers.anthropic.apiKey))';
    expect(await warnings()).toEqual([`agents.entries.${agent}.model: agent "${agent}" cannot run: ${problem}`]);
    expect(await runOnce(agent)).toMatchObject({ status: "error", error: problem });
  });
});

describe("provider blocks and key forms", () => {
  it("a partial block overrides only baseUrl and apiKey: the built-in API stays (Azure-style)", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "openai/gpt-6-astra" }, entries: { [agent]: {} } },
      models: { providers: { openai: { baseUrl: "https://azure.test/openai/v1", apiKey: "azure-key" } } },
    });
    const calls = fakeWire(
      "openai-responses",
      () => ({ text: "from azure" }),
      undefined,
      "https://azure.test/openai/v1",
    );
    expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: "from azure" });
    expect(calls[0].url).toBe("https://azure.test/openai/v1/responses");
    expect(calls[0].headers.authorization).toBe("Bearer azure-key");
  });

  it("OpenClaw's Anthropic base URL names the host; the API version is added", async () => {
    const agent = `m${uid()}`;
    setConfigOverride(
      {
        agents: { defaults: { model: "minimax/MiniMax-M2.7" }, entries: { [agent]: {} } },
        models: {
          providers: {
            minimax: { baseUrl: "https://mm.test/anthropic", api: "anthropic-messages", apiKey: "${MINIMAX_API_KEY}" },
          },
        },
      },
      { env: { MINIMAX_API_KEY: "mm-key" } },
    );
    const calls = fakeWire(
      "anthropic-messages",
      () => ({ text: "from minimax" }),
      undefined,
      "https://mm.test/anthropic",
    );
    expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: "from minimax" });
    expect(calls[0].url).toBe("https://mm.test/anthropic/v1/messages");
    expect(calls[0].headers["x-api-key"]).toBe("mm-key");
  });

  it.each([
    ["${MY_KEY}", "from-env"],
    ["$MY_KEY", "from-env"],
    ["env:MY_KEY", "from-env"],
    ["GROQ_API_KEY", "groq-env"], // a known provider variable name is read, not sent
    ["LITELLM_KEY", "LITELLM_KEY"], // any other string is the literal key, as in OpenClaw
  ])("apiKey %j sends %j", async (apiKey, sent) => {
    const agent = `m${uid()}`;
    setConfigOverride(
      {
        agents: { defaults: { model: "custom/m1" }, entries: { [agent]: {} } },
        models: {
          providers: { custom: { baseUrl: "https://custom.test/v1", apiKey, models: [{ id: "m1", name: "M1" }] } },
        },
      },
      { env: { MY_KEY: "from-env", GROQ_API_KEY: "groq-env" } },
    );
    const calls = fakeWire("openai-completions", () => ({ text: "ok" }), undefined, "https://custom.test/v1");
    expect(await runOnce(agent)).toMatchObject({ status: "ok" });
    expect(calls[0].headers.authorization).toBe(`Bearer ${sent}`);
  });

  it("an apiKey naming an unset variable is a warning naming the agent, not a literal key", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "custom/m1" }, entries: { [agent]: {} } },
      models: { providers: { custom: { baseUrl: "https://custom.test/v1", apiKey: "${NOT_SET_ANYWHERE}" } } },
    });
    expect(await warnings()).toEqual([
      `agents.defaults.model: agent "${agent}" cannot run: invalid model: custom/m1 (models.providers.custom.apiKey does not resolve (an env var it names is not set))`,
      'models.providers.custom.apiKey: env var "NOT_SET_ANYWHERE" is not set; the value keeps "${NOT_SET_ANYWHERE}" and the feature using it is unavailable',
    ]);
  });

  it("env.vars in CONFIG is read where the Worker's environment lacks the name (OpenClaw's inline env)", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({
      env: { vars: { ANTHROPIC_API_KEY: "inline-key" } },
      agents: { defaults: { model: { primary: "anthropic/claude-opus-5" } }, entries: { [agent]: {} } },
    });
    const calls = fakeWire("anthropic-messages", () => ({ text: "inline" }), undefined, "https://api.anthropic.com/v1");
    expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: "inline" });
    expect(calls[0].headers["x-api-key"]).toBe("inline-key");
  });
});

describe("aliases and bare ids", () => {
  it("an alias of agents.defaults.models names its model; an agent's own alias wins; built-in shorthands apply to listed models", async () => {
    const a = `m${uid()}`;
    const b = `m${uid()}`;
    const c = `m${uid()}`;
    setConfigOverride({
      agents: {
        defaults: {
          model: "builtin/echo",
          models: { "custom/big-model": { alias: "Big" }, "custom/gpt-5.4-mini": {} },
        },
        entries: {
          [a]: { model: "big" },
          [b]: { model: "big", models: { "custom/small-model": { alias: "big" } } },
          [c]: { model: "custom/big" },
        },
      },
      models: { providers: { custom: { baseUrl: "https://alias.test/v1", models: [] } } },
    });
    const calls = fakeWire(
      "openai-completions",
      (_n, body) => ({ text: body.model }),
      undefined,
      "https://alias.test/v1",
    );
    expect(await runOnce(a)).toMatchObject({ status: "ok", reply: "big-model" });
    expect(await runOnce(b)).toMatchObject({ status: "ok", reply: "small-model" });
    // `<provider>/<alias>` resolves the alias within that provider.
    expect(await runOnce(c)).toMatchObject({ status: "ok", reply: "big-model" });
    expect(calls).toHaveLength(3);
    // A session's model set by PATCH may be an alias too.
    const key = `agent:${a}:patched`;
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { model: "BIG" })).status).toBe(200);
    expect(await sendAndWait(key, "x")).toMatchObject({ status: "ok", reply: "big-model" });
  });

  it("a bare model id is the one configured provider's that lists it", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "llama-3.1-8b" }, entries: { [agent]: {} } },
      models: {
        providers: {
          local: { baseUrl: "https://local.test/v1", models: [{ id: "llama-3.1-8b", name: "Llama" }] },
        },
      },
    });
    const calls = fakeWire("openai-completions", () => ({ text: "llama here" }), undefined, "https://local.test/v1");
    expect(await warnings()).toEqual([]);
    expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: "llama here" });
    expect(calls[0].body.model).toBe("llama-3.1-8b");
  });
});

describe("the default model", () => {
  it("no model configured: OpenClaw's openai/gpt-6-astra when its key is set, else the offline echo with a warning", async () => {
    const agent = `m${uid()}`;
    setConfigOverride({ agents: { entries: { [agent]: {} } } }, { env: { OPENAI_API_KEY: "sk-default" } });
    const calls = fakeWire("openai-responses", () => ({ text: "astra" }), undefined, "https://api.openai.com/v1");
    expect(await warnings()).toEqual([]);
    expect(await runOnce(agent)).toMatchObject({ status: "ok", reply: "astra" });
    expect(calls[0].body.model).toBe("gpt-6-astra");

    const offline = `m${uid()}`;
    setConfigOverride({ agents: { entries: { [offline]: {} } } });
    expect(await warnings()).toEqual([
      `agents.defaults.model: not set, and OpenClaw's default openai/gpt-6-astra cannot run here (no API key for provider "openai" (set the Worker secret CODEX_API_KEY or OPENAI_API_KEY, or models.providers.openai.apiKey)); agents without a model run on the offline builtin/echo`,
    ]);
    expect(await runOnce(offline)).toMatchObject({ status: "ok", reply: "hello" });
    expect((await call("GET", "/v1/agents")).json.agents[0].model).toBe("builtin/echo");
  });
});

import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogle } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV4, SharedV4ProviderOptions } from "@ai-sdk/provider";
import { createWorkersAI } from "workers-ai-provider";
import type { Config } from "../config/schema";
import { SwitchboardError } from "../errors";
import { rememberSecrets } from "../log";
import { echoModel } from "./builtin-models";
import { providerFetch } from "./provider-fetch";
import { type ThinkingLevel, thinkingProviderOptions } from "./thinking";

/**
 * Model references are `<provider>/<model>`: `builtin/echo` (offline), `workers-ai/<model>` (the AI
 * binding, through workers-ai-provider: tools and usage like any provider), or a provider from `models.providers`, spoken to through the AI SDK provider of its
 * `api`: openai-completions (any OpenAI-compatible chat endpoint), openai-responses, anthropic-messages,
 * google-generative-ai.
 */
export interface ResolvedModel {
  ref: string;
  provider: string;
  modelId: string;
  api: string;
  cost?: { input?: number; output?: number };
  model: LanguageModelV4;
  /** Provider options that carry a thinking level to this model (undefined: none to send). */
  thinkingOptions(level: ThinkingLevel | undefined): SharedV4ProviderOptions | undefined;
}

export function splitModelRef(ref: string): { provider: string; modelId: string } | null {
  const at = ref.indexOf("/");
  if (at <= 0 || at === ref.length - 1) return null;
  return { provider: ref.slice(0, at), modelId: ref.slice(at + 1) };
}

/** Validate a model reference against config without building a client (spawn's "invalid model" check). */
export function checkModelRef(cfg: Config, env: Env, ref: string): string | null {
  const parts = splitModelRef(ref.trim());
  if (!parts) return `invalid model: ${ref} (use <provider>/<model>)`;
  if (parts.provider === "builtin")
    return parts.modelId === "echo" ? null : `invalid model: ${ref} (builtin models: builtin/echo)`;
  if (parts.provider === "workers-ai")
    return env.AI ? null : `invalid model: ${ref} (no Workers AI binding "AI" is bound)`;
  const provider = cfg.models.providers[parts.provider];
  if (!provider)
    return `invalid model: ${ref} (unknown provider "${parts.provider}"; configure models.providers.${parts.provider})`;
  if (provider.models && provider.models.length > 0 && !provider.models.some((m) => m.id === parts.modelId)) {
    return `invalid model: ${ref} (model "${parts.modelId}" is not listed in models.providers.${parts.provider}.models)`;
  }
  return null;
}

export function resolveModel(cfg: Config, env: Env, ref: string): ResolvedModel {
  const problem = checkModelRef(cfg, env, ref);
  if (problem) throw new SwitchboardError("invalid_request", problem);
  const { provider, modelId } = splitModelRef(ref.trim())!;
  const noThinking = () => undefined;
  if (provider === "builtin")
    return { ref, provider, modelId, api: "builtin", model: echoModel(), thinkingOptions: noThinking };
  if (provider === "workers-ai")
    return {
      ref,
      provider,
      modelId,
      api: "workers-ai",
      // checkModelRef above refused the reference when no AI binding is bound.
      model: createWorkersAI({ binding: env.AI! })(modelId),
      thinkingOptions: noThinking,
    };
  const p = cfg.models.providers[provider];
  return {
    ref,
    provider,
    modelId,
    api: p.api,
    cost: p.models?.find((m) => m.id === modelId)?.cost,
    model: providerModel(provider, p, resolveSecret(env, p.apiKey), modelId),
    thinkingOptions: (level) => thinkingProviderOptions(p.api, provider, level),
  };
}

type ProviderConfig = Config["models"]["providers"][string];

function providerModel(name: string, p: ProviderConfig, apiKey: string | undefined, modelId: string): LanguageModelV4 {
  switch (p.api) {
    // Every provider calls out through providerFetch: no redirects, a time and a size bound (provider-fetch.ts).
    case "openai-responses":
      return createOpenAI({ name, baseURL: p.baseUrl, apiKey, fetch: providerFetch }).responses(modelId);
    case "anthropic-messages":
      return createAnthropic({ baseURL: p.baseUrl, apiKey, fetch: providerFetch }).messages(modelId);
    case "google-generative-ai":
      return createGoogle({ baseURL: p.baseUrl, apiKey, fetch: providerFetch }).chat(modelId);
    case "openai-completions":
      // baseUrl is required for this API (src/config/schema.ts). Every remote run streams
      // (src/runners/builtin-run.ts), and a streamed chat completion carries usage only when asked (`stream_options.include_usage`).
      return createOpenAICompatible({
        name,
        baseURL: p.baseUrl!,
        apiKey,
        includeUsage: true,
        fetch: providerFetch,
      }).chatModel(modelId);
  }
}

/** `env:NAME` (or OpenClaw's `${NAME}`) reads the Worker secret NAME, so keys never sit in CONFIG itself. */
function resolveSecret(env: Env, value: string | undefined): string | undefined {
  if (!value) return undefined;
  const name = value.startsWith("env:") ? value.slice(4) : /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value)?.[1];
  if (name === undefined) return value;
  const v = (env as unknown as Record<string, unknown>)[name];
  rememberSecrets([v]); // read from a binding: keep it out of every log line (src/log.ts)
  return typeof v === "string" ? v : undefined;
}

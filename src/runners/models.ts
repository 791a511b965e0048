import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogle } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV4, SharedV4ProviderOptions } from "@ai-sdk/provider";
import { createWorkersAI } from "workers-ai-provider";
import { envOf } from "../config/load";
import type { Config } from "../config/schema";
import { SwitchboardError } from "../errors";
import { rememberSecrets } from "../log";
import { echoModel } from "./builtin-models";
import { type ProviderSettings, resolveModelTarget, splitModelRef } from "./model-resolution";
import { providerFetch } from "./provider-fetch";
import { type ThinkingLevel, thinkingProviderOptions } from "./thinking";

/**
 * A model reference (docs/models.md) as a client: `builtin/echo` (offline), `workers-ai/<model>` (the AI
 * binding, through workers-ai-provider: tools and usage like any provider), or a provider — built-in
 * (src/runners/provider-catalog.ts) or from `models.providers` — spoken to through the AI SDK provider of
 * its `api`: openai-completions (any OpenAI-compatible chat endpoint), openai-responses,
 * anthropic-messages, google-generative-ai. Which reference means which provider, and where its key
 * comes from, is src/runners/model-resolution.ts.
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

export { splitModelRef };

export interface ModelOptions {
  /** The agent whose aliases apply (its `models` map wins over `agents.defaults.models`). */
  agentId?: string;
  /**
   * The `fetch` every provider request goes through: by default providerFetch, which follows no redirect and
   * bounds each call's time and size (src/runners/provider-fetch.ts, docs/limits.md "Outbound calls").
   */
  fetch?: typeof fetch;
}

/** Validate a model reference against config without building a client (spawn's "invalid model" check, PATCH). */
export function checkModelRef(cfg: Config, env: Env, ref: string, opts: ModelOptions = {}): string | null {
  const target = resolveModelTarget(cfg, ref, envOf(cfg, env), { agentId: opts.agentId, hasWorkersAi: !!env.AI });
  return target.ok ? null : target.problem;
}

export function resolveModel(cfg: Config, env: Env, ref: string, opts: ModelOptions = {}): ResolvedModel {
  const target = resolveModelTarget(cfg, ref, envOf(cfg, env), { agentId: opts.agentId, hasWorkersAi: !!env.AI });
  if (!target.ok) throw new SwitchboardError("invalid_request", target.problem);
  const { provider, modelId, settings } = target.value;
  const noThinking = () => undefined;
  if (provider === "builtin")
    return {
      ref: target.value.ref,
      provider,
      modelId,
      api: "builtin",
      model: echoModel(),
      thinkingOptions: noThinking,
    };
  if (!settings)
    return {
      ref: target.value.ref,
      provider,
      modelId,
      api: "workers-ai",
      // resolveModelTarget refused the reference when no AI binding is bound.
      model: createWorkersAI({ binding: env.AI! })(modelId),
      thinkingOptions: noThinking,
    };
  // A key read from the environment is kept out of every log line (src/log.ts).
  rememberSecrets([settings.apiKey]);
  return {
    ref: target.value.ref,
    provider,
    modelId,
    api: settings.api,
    cost: settings.models?.find((m) => m.id === modelId)?.cost,
    model: providerModel(settings, modelId, opts.fetch ?? providerFetch),
    thinkingOptions: (level) => thinkingProviderOptions(settings.api, provider, level),
  };
}

function providerModel(p: ProviderSettings, modelId: string, fetch: typeof globalThis.fetch): LanguageModelV4 {
  // Every provider calls out through this one fetch (providerFetch unless a caller passes another).
  const common = { baseURL: p.baseUrl, apiKey: p.apiKey, headers: p.headers, fetch };
  switch (p.api) {
    case "openai-responses":
      return createOpenAI({ name: p.id, ...common }).responses(modelId);
    case "anthropic-messages":
      return createAnthropic(common).messages(modelId);
    case "google-generative-ai":
      return createGoogle(common).chat(modelId);
    case "openai-completions":
      // Every remote run streams (src/runners/builtin-run.ts), and a streamed chat completion carries usage
      // only when asked (`stream_options.include_usage`).
      return createOpenAICompatible({ name: p.id, ...common, includeUsage: true }).chatModel(modelId);
  }
}

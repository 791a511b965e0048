/**
 * The built-in provider catalogue: OpenClaw 2026.9.6's bundled, enabled-by-default model providers that
 * speak an API this gateway runs, with their API kind, default base URL and the environment variables
 * their key is read from, in OpenClaw's order (docs/models.md, "Built-in providers"). A model reference
 * `<id>/<model>` to one of them works with only its key in the Worker's environment; a
 * `models.providers.<id>` block overrides any of these fields (src/runners/model-resolution.ts).
 *
 * Data only: adding a provider is a row here and a row in docs/models.md.
 */

/** Provider APIs we run, each through its AI SDK provider (src/runners/models.ts). */
export const PROVIDER_APIS = [
  "openai-completions",
  "openai-responses",
  "anthropic-messages",
  "google-generative-ai",
] as const;
export type ProviderApi = (typeof PROVIDER_APIS)[number];

export interface BuiltinProvider {
  api: ProviderApi;
  /** Where its API is served. Loopback URLs (local servers) only work under `wrangler dev`. */
  baseUrl: string;
  /** Environment variables holding its key, first found wins. */
  envVars: readonly string[];
  /** The provider runs without a key (a local server); any key given is still sent. */
  keyless?: true;
}

export const BUILTIN_PROVIDERS: Readonly<Record<string, BuiltinProvider>> = {
  anthropic: {
    api: "anthropic-messages",
    baseUrl: "https://api.anthropic.com/v1",
    // OpenClaw also reads ANTHROPIC_OAUTH_TOKEN (a subscription's OAuth token); that needs its own auth flow, not read here.
    envVars: ["ANTHROPIC_API_KEY"],
  },
  openai: {
    api: "openai-responses",
    baseUrl: "https://api.openai.com/v1",
    envVars: ["CODEX_API_KEY", "OPENAI_API_KEY"],
  },
  google: {
    api: "google-generative-ai",
    baseUrl: "https://generativelanguage.googleapis.com/v1beta",
    envVars: ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
  },
  openrouter: { api: "openai-completions", baseUrl: "https://openrouter.ai/api/v1", envVars: ["OPENROUTER_API_KEY"] },
  xai: { api: "openai-responses", baseUrl: "https://api.x.ai/v1", envVars: ["XAI_API_KEY"] },
  huggingface: {
    api: "openai-completions",
    baseUrl: "https://router.huggingface.co/v1",
    envVars: ["HUGGINGFACE_HUB_TOKEN", "HF_TOKEN"],
  },
  nvidia: { api: "openai-completions", baseUrl: "https://integrate.api.nvidia.com/v1", envVars: ["NVIDIA_API_KEY"] },
  together: { api: "openai-completions", baseUrl: "https://api.together.xyz/v1", envVars: ["TOGETHER_API_KEY"] },
  "opencode-go": {
    api: "openai-completions",
    baseUrl: "https://opencode.ai/zen/go/v1",
    envVars: ["OPENCODE_API_KEY", "OPENCODE_ZEN_API_KEY"],
  },
  minimax: {
    api: "anthropic-messages",
    baseUrl: "https://api.minimax.io/anthropic/v1",
    envVars: ["MINIMAX_CODE_PLAN_KEY", "MINIMAX_CODING_API_KEY", "MINIMAX_API_KEY"],
  },
  // OpenClaw speaks Ollama's native API; its OpenAI-compatible endpoint serves the same models.
  ollama: {
    api: "openai-completions",
    baseUrl: "http://127.0.0.1:11434/v1",
    envVars: ["OLLAMA_API_KEY"],
    keyless: true,
  },
  "ollama-cloud": { api: "openai-completions", baseUrl: "https://ollama.com/v1", envVars: ["OLLAMA_API_KEY"] },
  vllm: { api: "openai-completions", baseUrl: "http://127.0.0.1:8000/v1", envVars: ["VLLM_API_KEY"], keyless: true },
  sglang: {
    api: "openai-completions",
    baseUrl: "http://127.0.0.1:30000/v1",
    envVars: ["SGLANG_API_KEY"],
    keyless: true,
  },
  lmstudio: {
    api: "openai-completions",
    baseUrl: "http://localhost:1234/v1",
    envVars: ["LM_API_TOKEN"],
    keyless: true,
  },
  litellm: {
    api: "openai-completions",
    baseUrl: "http://localhost:4000/v1",
    envVars: ["LITELLM_API_KEY"],
    keyless: true,
  },
};

/** OpenClaw's aliases of built-in provider ids. */
const PROVIDER_ID_ALIASES: Readonly<Record<string, string>> = { "x-ai": "xai", "minimax-portal": "minimax" };

export function builtinProvider(id: string): BuiltinProvider | undefined {
  const key = id.trim().toLowerCase();
  return BUILTIN_PROVIDERS[PROVIDER_ID_ALIASES[key] ?? key];
}

/**
 * Every environment variable name OpenClaw treats as a key marker: an `apiKey` that is exactly one of these
 * names is read from that variable, not sent as the key itself (docs/models.md, "Keys").
 */
export const KNOWN_KEY_VARIABLES: ReadonlySet<string> = new Set([
  ...Object.values(BUILTIN_PROVIDERS).flatMap((p) => p.envVars),
  "DEEPSEEK_API_KEY",
  "PERPLEXITY_API_KEY",
  "FIREWORKS_API_KEY",
  "NOVITA_API_KEY",
  "AZURE_OPENAI_API_KEY",
  "AZURE_API_KEY",
  "GROQ_API_KEY",
  "MISTRAL_API_KEY",
]);

/**
 * OpenClaw's built-in model shorthands: they apply only to a model listed in `agents.defaults.models`
 * without an alias of its own (configured aliases win).
 */
export const DEFAULT_MODEL_ALIASES: Readonly<Record<string, string>> = {
  opus: "anthropic/claude-opus-5",
  sonnet: "anthropic/claude-sonnet-5",
  gpt: "openai/gpt-5.4",
  "gpt-mini": "openai/gpt-5.4-mini",
  "gpt-nano": "openai/gpt-5.4-nano",
  gemini: "google/gemini-3.1-pro-preview",
  "gemini-flash": "google/gemini-3-flash-preview",
  "gemini-flash-lite": "google/gemini-3.1-flash-lite",
};

/** OpenClaw's default model when none is configured, and its default provider for a bare model id. */
export const OPENCLAW_DEFAULT_MODEL = "openai/gpt-6-astra";
export const OPENCLAW_DEFAULT_PROVIDER = "openai";

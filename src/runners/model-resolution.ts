import type { Config, ProviderConfig } from "../config/schema";
import {
  builtinProvider,
  DEFAULT_MODEL_ALIASES,
  KNOWN_KEY_VARIABLES,
  OPENCLAW_DEFAULT_MODEL,
  OPENCLAW_DEFAULT_PROVIDER,
  type ProviderApi,
} from "./provider-catalog";

/**
 * How a model reference becomes a provider, a model id and a key, as OpenClaw resolves it
 * (docs/models.md, "Model references"): aliases, `<provider>/<model>`, bare ids, the built-in provider
 * catalogue (src/runners/provider-catalog.ts) with `models.providers.<id>` blocks merged over it, and
 * keys from the environment. Pure: the caller passes the environment lookup, so the same code checks
 * every agent's model when the config loads (src/config/agent-checks.ts) and builds the client of a run
 * (src/runners/models.ts).
 */

/** Reads one environment variable (Worker secret or var, then CONFIG `env.vars`). */
export type EnvLookup = (name: string) => string | undefined;

export interface ProviderSettings {
  id: string;
  api: ProviderApi;
  baseUrl: string;
  apiKey?: string;
  headers?: Record<string, string>;
  models?: ProviderConfig["models"];
}

export type Resolved<T> = { ok: true; value: T } | { ok: false; problem: string };
const fail = <T>(problem: string): Resolved<T> => ({ ok: false, problem });

export function splitModelRef(ref: string): { provider: string; modelId: string } | null {
  const at = ref.indexOf("/");
  if (at <= 0 || at === ref.length - 1) return null;
  return { provider: ref.slice(0, at), modelId: ref.slice(at + 1) };
}

/** Providers that need no configuration or network: the offline echo model and the Workers AI binding. */
const PLATFORM_PROVIDERS = new Set(["builtin", "workers-ai"]);

const UNRESOLVED = /\$\{[A-Z_][A-Z0-9_]*\}/;

/**
 * The key of an `apiKey` value: `${NAME}` (already substituted when the config loaded; still a placeholder
 * when NAME was not set), `$NAME`, `env:NAME` (Switchboard's own form), a known provider variable name,
 * or the literal key.
 */
export function resolveApiKey(value: string | undefined, env: EnvLookup): string | undefined {
  if (!value) return undefined;
  if (UNRESOLVED.test(value)) return undefined;
  const named = value.startsWith("env:") ? value.slice(4) : /^\$([A-Z][A-Z0-9_]{0,127})$/.exec(value)?.[1];
  if (named !== undefined) return env(named);
  if (KNOWN_KEY_VARIABLES.has(value)) return env(value);
  return value;
}

/**
 * OpenClaw's Anthropic base URL names the host (`https://api.anthropic.com`, `…/anthropic`); the AI SDK's
 * names the API version (`…/v1`). Either form works here.
 */
function apiBaseUrl(api: ProviderApi, baseUrl: string): string {
  const trimmed = baseUrl.replace(/\/+$/, "");
  return api === "anthropic-messages" && !/\/v\d+$/.test(trimmed) ? `${trimmed}/v1` : trimmed;
}

/**
 * A provider's effective settings: its `models.providers` block merged over the built-in entry (any subset
 * of keys overrides), or the block alone for a custom provider (which then needs `baseUrl`).
 */
export function providerSettings(cfg: Config, id: string, env: EnvLookup): Resolved<ProviderSettings> {
  const configured = cfg.models.providers[id];
  const builtin = cfg.models.mode === "replace" ? undefined : builtinProvider(id);
  if (!configured && !builtin) {
    return fail(
      cfg.models.mode === "replace"
        ? `unknown provider "${id}"; configure models.providers.${id} (models.mode is "replace": no built-in providers)`
        : `unknown provider "${id}"; configure models.providers.${id}`,
    );
  }
  const api = configured?.api ?? builtin?.api ?? "openai-completions";
  const rawBase = configured?.baseUrl ?? builtin?.baseUrl;
  if (!rawBase) return fail(`models.providers.${id}.baseUrl is required for a custom provider`);
  if (UNRESOLVED.test(rawBase)) return fail(`models.providers.${id}.baseUrl refers to an env var that is not set`);
  try {
    new URL(rawBase);
  } catch {
    return fail(`models.providers.${id}.baseUrl is not a URL`);
  }
  const configuredKey = resolveApiKey(configured?.apiKey, env);
  // A configured key that resolves to nothing (an unset variable) does not fall back: it was chosen.
  if (configured?.apiKey !== undefined && !configuredKey)
    return fail(`models.providers.${id}.apiKey does not resolve (an env var it names is not set)`);
  const apiKey = configuredKey ?? builtin?.envVars.map((n) => env(n)).find(Boolean);
  // A built-in provider at its own URL needs its key; a local server, or any URL the config chose, may not.
  if (!apiKey && builtin && !builtin.keyless && configured?.baseUrl === undefined)
    return fail(
      `no API key for provider "${id}" (set the Worker secret ${builtin.envVars.join(" or ")}, or models.providers.${id}.apiKey)`,
    );
  return {
    ok: true,
    value: {
      id,
      api,
      baseUrl: apiBaseUrl(api, rawBase),
      ...(apiKey ? { apiKey } : {}),
      ...(configured?.headers ? { headers: configured.headers } : {}),
      ...(configured?.models ? { models: configured.models } : {}),
    },
  };
}

/** Aliases of an agent (its own model map wins over `agents.defaults.models`), keyed lower-case. */
function aliasesOf(cfg: Config, agentId?: string): Map<string, string> {
  const out = new Map<string, string>();
  const defaults = cfg.agents.defaults.models ?? {};
  // Built-in shorthands apply to a listed model without an alias of its own.
  for (const [alias, ref] of Object.entries(DEFAULT_MODEL_ALIASES))
    if (defaults[ref] && !defaults[ref].alias) out.set(alias, ref);
  const own = agentId ? cfg.agents.roster.find((a) => a.id === agentId)?.models : undefined;
  for (const map of [defaults, own ?? {}])
    for (const [ref, settings] of Object.entries(map))
      if (settings.alias?.trim()) out.set(settings.alias.trim().toLowerCase(), ref);
  return out;
}

/**
 * A model reference as written in CONFIG, a spawn or a PATCH → `<provider>/<model>`: an alias
 * (case-insensitive), `<provider>/<alias>`, `<provider>/<model>` as is, or a bare model id (the one
 * configured provider listing it, else OpenClaw's default provider).
 */
export function canonicalModelRef(cfg: Config, raw: string, agentId?: string): Resolved<string> {
  const ref = raw.trim();
  if (!ref) return fail("empty model reference");
  const aliases = aliasesOf(cfg, agentId);
  const alias = aliases.get(ref.toLowerCase());
  if (alias) return { ok: true, value: alias };
  const parts = splitModelRef(ref);
  if (parts) {
    if (PLATFORM_PROVIDERS.has(parts.provider)) return { ok: true, value: ref };
    const listed = cfg.models.providers[parts.provider]?.models?.some((m) => m.id === parts.modelId);
    const scoped = aliases.get(parts.modelId.toLowerCase());
    if (!listed && scoped && splitModelRef(scoped)?.provider === parts.provider) return { ok: true, value: scoped };
    return { ok: true, value: ref };
  }
  const listing = Object.entries(cfg.models.providers).filter(([, p]) => p.models?.some((m) => m.id === ref));
  if (listing.length === 1) return { ok: true, value: `${listing[0][0]}/${ref}` };
  if (listing.length > 1)
    return fail(
      `model "${ref}" is listed by several providers (${listing.map(([id]) => id).join(", ")}); write <provider>/${ref}`,
    );
  return { ok: true, value: `${OPENCLAW_DEFAULT_PROVIDER}/${ref}` };
}

export interface ModelTarget {
  ref: string;
  provider: string;
  modelId: string;
  /** Settings of a provider model (absent for builtin and Workers AI). */
  settings?: ProviderSettings;
}

/** Everything a run needs to build its client, or why the reference cannot run. */
export function resolveModelTarget(
  cfg: Config,
  raw: string,
  env: EnvLookup,
  opts: { agentId?: string; hasWorkersAi: boolean },
): Resolved<ModelTarget> {
  const canonical = canonicalModelRef(cfg, raw, opts.agentId);
  if (!canonical.ok) return fail(`invalid model: ${raw} (${canonical.problem})`);
  const ref = canonical.value;
  const parts = splitModelRef(ref);
  if (!parts) return fail(`invalid model: ${raw} (use <provider>/<model> or an alias)`);
  const { provider, modelId } = parts;
  if (provider === "builtin")
    return modelId === "echo"
      ? { ok: true, value: { ref, provider, modelId } }
      : fail(`invalid model: ${raw} (builtin models: builtin/echo)`);
  if (provider === "workers-ai")
    return opts.hasWorkersAi
      ? { ok: true, value: { ref, provider, modelId } }
      : fail(`invalid model: ${raw} (no Workers AI binding "AI" is bound)`);
  const settings = providerSettings(cfg, provider, env);
  if (!settings.ok) return fail(`invalid model: ${raw} (${settings.problem})`);
  const listed = cfg.models.providers[provider]?.models;
  // A custom provider's model list is its catalogue: a model it does not list is a typo, not a request.
  if (!builtinProvider(provider) && listed && listed.length > 0 && !listed.some((m) => m.id === modelId))
    return fail(`invalid model: ${raw} (model "${modelId}" is not listed in models.providers.${provider}.models)`);
  return { ok: true, value: { ref, provider, modelId, settings: settings.value } };
}

/**
 * The model of agents that name none, as OpenClaw picks it: the first model of the first configured
 * provider, else OpenClaw's default (`openai/gpt-6-astra`) — when its key is in the environment. Without
 * one, the offline `builtin/echo`, so a fresh deployment answers (a warning says so: src/config/agent-checks.ts).
 */
export function defaultModelRef(cfg: Config, env: EnvLookup): { ref: string; fellBack?: string } {
  for (const [id, p] of Object.entries(cfg.models.providers)) {
    const first = p.models?.[0]?.id;
    if (first) return { ref: `${id}/${first}` };
  }
  const openai = resolveModelTarget(cfg, OPENCLAW_DEFAULT_MODEL, env, { hasWorkersAi: false });
  return openai.ok ? { ref: OPENCLAW_DEFAULT_MODEL } : { ref: "builtin/echo", fellBack: openai.problem };
}

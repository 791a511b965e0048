import { SwitchboardError } from "../errors";
import { log, rememberSecrets } from "../log";
import { defaultModelRef, type EnvLookup } from "../runners/model-resolution";
import { issuesText } from "../zod-issue-text";
import { agentWarnings, echoFallbackWarning } from "./agent-checks";
import { type Doc, moveLegacyKeys } from "./carry-over";
import { mapValues } from "./carry-over-values";
import { envLookupOf, resolveEnvRefs } from "./env-refs";
import { type AgentConfig, type Config, ConfigSchema } from "./schema";
import { schemaReads } from "./schema-walk";
import { unusedKeys } from "./unused-keys";

/**
 * Parse CONFIG once per isolate per raw value. An invalid config never crashes the Worker:
 * every request answers a 500 envelope naming the bad path, so an operator sees what to fix.
 */
let cache: { raw: unknown; result: Config | SwitchboardError } | undefined;

/**
 * Tests (which share the Worker's isolate) swap the CONFIG document per test with this instead of
 * restarting the runtime; `env` stands in for Worker secrets the test's CONFIG reads (API keys).
 * Never set in production code paths.
 */
let override: { raw: unknown; env: Record<string, string> } | null = null;
export function setConfigOverride(raw: unknown | null, opts: { env?: Record<string, string> } = {}): void {
  override = raw === null ? null : { raw, env: opts.env ?? {} };
}

/** The environment a config reads (`${VAR}`, SecretRefs, provider keys): the Worker's bindings, then `env.vars`. */
export function envOf(cfg: Pick<Config, "env">, bindings: object): EnvLookup {
  const vars = cfg.env?.vars ?? {};
  const extra = override?.env ?? {};
  return (name) => {
    const v = extra[name] ?? (bindings as Record<string, unknown>)[name] ?? vars[name];
    return typeof v === "string" && v !== "" ? v : undefined;
  };
}

export function loadConfig(env: Env): Config {
  const raw = override ? override : env.CONFIG;
  if (!cache || cache.raw !== raw) {
    cache = { raw, result: parseConfig(override ? override.raw : env.CONFIG, env) };
    if (!(cache.result instanceof SwitchboardError)) rememberSecrets(configSecrets(cache.result));
    // Logged once per isolate and CONFIG value: at first use, not on every request.
    const warnings = cache.result instanceof SwitchboardError ? [] : configWarnings(cache.result);
    if (warnings.length > 0) log.warn("config_warnings", { count: warnings.length, warnings });
  }
  if (cache.result instanceof SwitchboardError) throw cache.result;
  return cache.result;
}

/** Secret values written in (or read into) CONFIG: never printed in a log line (src/log.ts). */
function configSecrets(cfg: Config): unknown[] {
  return [
    ...Object.values(cfg.channels ?? {}).map((ch) => ch?.outbound?.secret),
    ...cfg.agents.roster.map((a) => (a.runtime.type === "webhook" ? a.runtime.secret : undefined)),
    ...Object.values(cfg.models?.providers ?? {}).map((p) => p?.apiKey),
    ...Object.values(cfg.env?.vars ?? {}),
    ...(RESOLVED.get(cfg) ?? []),
  ];
}

/**
 * CONFIG → the parsed config and its warnings. `bindings` is the Worker's environment: `${VAR}` and
 * SecretRefs are read from it, and whether provider keys are present decides the default model and
 * the model warnings (src/config/agent-checks.ts).
 */
export function parseConfig(raw: unknown, bindings: object = {}): Config | SwitchboardError {
  let doc: unknown = raw ?? {};
  if (typeof doc === "string") {
    try {
      doc = doc.trim() === "" ? {} : JSON.parse(doc);
    } catch (err) {
      return new SwitchboardError("config_error", `Invalid CONFIG: not valid JSON (${(err as Error).message})`);
    }
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    return new SwitchboardError("config_error", "Invalid CONFIG: expected a JSON object");
  }
  const carried = structuredClone(doc) as Doc;
  const warnings: string[] = [];
  moveLegacyKeys(carried, warnings);
  const extra = override?.env ?? {};
  const fromDoc = envLookupOf(bindings, carried);
  const refs = resolveEnvRefs(
    carried,
    (name) => extra[name] || fromDoc(name),
    (path) => schemaReads(ConfigSchema, path),
  );
  warnings.push(...refs.warnings);
  mapValues(carried, warnings);
  const parsed = ConfigSchema.safeParse(carried);
  if (!parsed.success)
    return new SwitchboardError("config_error", `Invalid CONFIG: ${issuesText(parsed.error.issues, "(root)")}`);
  const cfg = parsed.data;
  const env = envOf(cfg, bindings);
  const hasWorkersAi = "AI" in bindings && !!(bindings as { AI?: unknown }).AI;
  const early: string[] = [];
  if (cfg.agents.defaults.model === undefined) {
    const d = defaultModelRef(cfg, env);
    cfg.agents.defaults.model = d.ref;
    if (d.fellBack) early.push(echoFallbackWarning(d.fellBack));
  }
  early.push(...agentWarnings(cfg, env, hasWorkersAi));
  WARNINGS.set(cfg, [...early, ...warnings, ...unusedKeys(carried, ConfigSchema)]);
  RESOLVED.set(cfg, refs.resolved);
  return cfg;
}

const WARNINGS = new WeakMap<Config, string[]>();
const RESOLVED = new WeakMap<Config, string[]>();

/**
 * What the gateway could not use as written (GET /healthz, operator): agents that cannot run and why
 * first, then what carried over only by mapping or clamping, then every key it ignores, grouped.
 */
export function configWarnings(cfg: Config): string[] {
  return WARNINGS.get(cfg) ?? [];
}

/** Default agent: `agents.defaults.systemAgent.agentId` → `default: true` → the first entry, as in OpenClaw. */
export function defaultAgentId(cfg: Config): string {
  return cfg.agents.defaultId;
}

export function findAgent(cfg: Config, agentId: string): AgentConfig | undefined {
  return cfg.agents.roster.find((a) => a.id === agentId);
}

/** Why an agent cannot run here (its runtime), or null when it can. */
export function agentUnavailable(cfg: Config, agentId: string): string | null {
  const runtime = findAgent(cfg, agentId)?.runtime;
  if (runtime?.type !== "unavailable") return null;
  return `Agent "${agentId}" is unavailable: its runtime type "${runtime.requested}" is not supported by this gateway (see GET /healthz warnings)`;
}

/** The sandbox mode of an agent: its own, else `agents.defaults.sandbox.mode`. */
function sandboxModeOf(cfg: Config, agentId: string): "off" | "non-main" | "all" {
  return findAgent(cfg, agentId)?.sandbox?.mode ?? cfg.agents.defaults.sandbox.mode;
}

/**
 * Whether a session runs sandboxed (its session tools clamped to what it spawned, its spawns limited to
 * sandboxed agents): `all` sandboxes every session of the agent, `non-main` every one but the agent's
 * main session (`agent:<id>:main`, or the global bucket), as in OpenClaw.
 */
export function isSessionSandboxed(cfg: Config, agentId: string, canonicalKey: string): boolean {
  const mode = sandboxModeOf(cfg, agentId);
  if (mode !== "non-main") return mode === "all";
  return canonicalKey !== "global" && canonicalKey !== `agent:${agentId}:${cfg.session.mainKey}`;
}

/** An agent's sandbox mode, as `GET /v1/agents` shows it. */
export function agentSandboxMode(cfg: Config, agentId: string): "off" | "non-main" | "all" {
  return sandboxModeOf(cfg, agentId);
}

/**
 * Whether the sessions `sessions_spawn` creates under an agent run sandboxed: a sub-agent session is never
 * the agent's main session, so under `non-main` as under `all` it is.
 */
export function areChildrenSandboxed(cfg: Config, agentId: string): boolean {
  return sandboxModeOf(cfg, agentId) !== "off";
}

/** Model of an agent: per-agent → `agents.defaults.model` (always set once loaded: parseConfig). */
export function agentModel(cfg: Config, agentId: string): string {
  return findAgent(cfg, agentId)?.model ?? cfg.agents.defaults.model!;
}

/** Thinking level an agent's runs default to: its own `thinkingDefault`, else `agents.defaults.thinkingDefault`. */
export function agentThinking(cfg: Config, agentId: string): string | undefined {
  return findAgent(cfg, agentId)?.thinkingDefault ?? cfg.agents.defaults.thinkingDefault;
}

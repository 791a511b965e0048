import { SwitchboardError } from "../errors";
import { log, rememberSecrets } from "../log";
import { issuesText } from "../zod-issue-text";
import { carryOverOpenClaw } from "./carry-over";
import { type AgentConfig, type Config, ConfigSchema } from "./schema";
import { unusedKeys } from "./unused-keys";

/**
 * Parse CONFIG once per isolate per raw value. An invalid config never crashes the Worker:
 * every request answers a 500 envelope naming the bad path, so an operator sees what to fix.
 */
let cache: { raw: unknown; result: Config | SwitchboardError } | undefined;

/**
 * Tests (which share the Worker's isolate) swap the CONFIG document per test with this instead of
 * restarting the runtime. Never set in production code paths.
 */
let override: { raw: unknown } | null = null;
export function setConfigOverride(raw: unknown | null): void {
  override = raw === null ? null : { raw };
}

export function loadConfig(env: Pick<Env, "CONFIG">): Config {
  const raw = override ? override.raw : env.CONFIG;
  if (!cache || cache.raw !== raw) {
    cache = { raw, result: parseConfig(raw) };
    if (!(cache.result instanceof SwitchboardError)) rememberSecrets(configSecrets(cache.result));
    // Logged once per isolate and CONFIG value: at first use, not on every request.
    const warnings = cache.result instanceof SwitchboardError ? [] : configWarnings(cache.result);
    if (warnings.length > 0) log.warn("config_warnings", { count: warnings.length, warnings });
  }
  if (cache.result instanceof SwitchboardError) throw cache.result;
  return cache.result;
}

/** Secret values written in CONFIG itself (webhook secrets, literal API keys): never printed in a log line (src/log.ts). */
function configSecrets(cfg: Config): unknown[] {
  return [
    ...Object.values(cfg.channels ?? {}).map((ch) => ch?.webhookSecret),
    ...cfg.agents.list.map((a) => (a.runtime?.type === "webhook" ? a.runtime.secret : undefined)),
    ...Object.values(cfg.models?.providers ?? {}).map((p) => p?.apiKey),
  ];
}

export function parseConfig(raw: unknown): Config | SwitchboardError {
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
  const carried = carryOverOpenClaw(doc as Record<string, unknown>);
  const parsed = ConfigSchema.safeParse(carried.doc);
  if (!parsed.success)
    return new SwitchboardError("config_error", `Invalid CONFIG: ${issuesText(parsed.error.issues, "(root)")}`);
  const cfg = parsed.data;
  const ids = new Set<string>();
  for (const [i, a] of cfg.agents.list.entries()) {
    if (ids.has(a.id))
      return new SwitchboardError("config_error", `Invalid CONFIG: agents.list.${i}.id: duplicate agent id "${a.id}"`);
    ids.add(a.id);
  }
  if (cfg.agents.list.length === 0)
    return new SwitchboardError("config_error", "Invalid CONFIG: agents.list: at least one agent is required");
  WARNINGS.set(cfg, [...carried.warnings, ...unusedKeys(carried.doc, ConfigSchema)]);
  return cfg;
}

const WARNINGS = new WeakMap<Config, string[]>();

/** What carried over from an OpenClaw config only by mapping, clamping or ignoring (GET /healthz, operator). */
export function configWarnings(cfg: Config): string[] {
  return WARNINGS.get(cfg) ?? [];
}

/** Default agent = `agents.list[].default` → first listed, as in OpenClaw. */
export function defaultAgentId(cfg: Config): string {
  return (cfg.agents.list.find((a) => a.default) ?? cfg.agents.list[0]).id;
}

export function findAgent(cfg: Config, agentId: string): AgentConfig | undefined {
  return cfg.agents.list.find((a) => a.id === agentId);
}

export function isAgentSandboxed(cfg: Config, agentId: string): boolean {
  const mode = findAgent(cfg, agentId)?.sandbox?.mode ?? cfg.agents.defaults.sandbox.mode;
  return mode === "all";
}

/** Model of an agent: per-agent → defaults → builtin/echo. */
export function agentModel(cfg: Config, agentId: string): string {
  return findAgent(cfg, agentId)?.model ?? cfg.agents.defaults.model;
}

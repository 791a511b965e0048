/**
 * OpenClaw configs carry over (docs/openclaw-carry-over.md): before the CONFIG document is validated,
 * values OpenClaw accepts but our schema would refuse are clamped or mapped, legacy key names are moved
 * to their current place, and every such change — and every key we do not use — becomes one warning.
 * The gateway then stays up on an OpenClaw config; only a value that is still invalid fails (a 500
 * naming the path, src/config/load.ts).
 *
 * Works on a copy of the raw JSON document; never throws.
 */

type Doc = Record<string, unknown>;

export interface CarriedOver {
  doc: Doc;
  warnings: string[];
}

/** Provider APIs we run (src/runners/models.ts); OpenClaw's legacy "openai" means openai-completions. */
export const PROVIDER_APIS = [
  "openai-completions",
  "openai-responses",
  "anthropic-messages",
  "google-generative-ai",
] as const;

const isObject = (v: unknown): v is Doc => typeof v === "object" && v !== null && !Array.isArray(v);

function objectAt(doc: Doc, path: string[], create: boolean): Doc | undefined {
  let node: Doc = doc;
  for (const key of path) {
    const next = node[key];
    if (isObject(next)) node = next;
    else if (create && next === undefined) node = node[key] = {};
    else return undefined;
  }
  return node;
}

export function carryOverOpenClaw(raw: Doc): CarriedOver {
  const doc = structuredClone(raw);
  const warnings: string[] = [];
  mapLegacyRouting(doc, warnings);
  mapLegacyAgent(doc, warnings);
  clampNumbers(doc, warnings);
  mapSendPolicyProvider(doc, warnings);
  normaliseSendPolicyValues(doc, warnings);
  mapSandboxModes(doc, warnings);
  mapThreadBindings(doc, warnings);
  mapProviderApis(doc, warnings);
  return { doc, warnings };
}

/** Move `value` to `to` unless the current key is already set (the current key wins, as in OpenClaw). */
function moveTo(doc: Doc, from: string, to: string[], value: unknown, warnings: string[]): void {
  const parent = objectAt(doc, to.slice(0, -1), true);
  const leaf = to[to.length - 1];
  if (!parent || parent[leaf] !== undefined) {
    warnings.push(`${from}: ignored (${to.join(".")} is set and wins)`);
    return;
  }
  parent[leaf] = value;
  warnings.push(`${from}: mapped to ${to.join(".")}`);
}

/** The older single-file spec's `routing.*` block. */
function mapLegacyRouting(doc: Doc, warnings: string[]): void {
  const routing = doc.routing;
  if (routing === undefined) return;
  delete doc.routing;
  if (!isObject(routing)) {
    warnings.push("routing: ignored (legacy key, not an object)");
    return;
  }
  for (const [key, value] of Object.entries(routing)) {
    if (key === "agentToAgent") moveTo(doc, "routing.agentToAgent", ["tools", "agentToAgent"], value, warnings);
    else if (key === "sessions" && isObject(value) && value.mainKey !== undefined) {
      moveTo(doc, "routing.sessions.mainKey", ["session", "mainKey"], value.mainKey, warnings);
      for (const k of Object.keys(value))
        if (k !== "mainKey") warnings.push(`routing.sessions.${k}: ignored (not used by Switchboard)`);
    } else if (key === "agents") {
      const list = legacyAgentList(value, routing.defaultAgentId);
      if (list) moveTo(doc, "routing.agents", ["agents", "list"], list, warnings);
      else warnings.push("routing.agents: ignored (expected an object keyed by agent id, or a list)");
    } else if (key !== "defaultAgentId") warnings.push(`routing.${key}: ignored (not used by Switchboard)`);
  }
  if (routing.defaultAgentId !== undefined && routing.agents === undefined)
    warnings.push("routing.defaultAgentId: ignored (no routing.agents)");
}

/** `routing.agents` was `{<id>: {...}}` (or a list) with `routing.defaultAgentId` naming the default. */
function legacyAgentList(value: unknown, defaultAgentId: unknown): Doc[] | null {
  const entries: Doc[] = Array.isArray(value)
    ? value.filter(isObject).map((a) => ({ ...a }))
    : isObject(value)
      ? Object.entries(value).map(([id, a]) => ({ ...(isObject(a) ? a : {}), id }))
      : [];
  if (entries.length === 0) return null;
  if (typeof defaultAgentId === "string") {
    for (const a of entries)
      if (typeof a.id === "string" && a.id.trim().toLowerCase() === defaultAgentId.trim().toLowerCase())
        a.default = true;
  }
  return entries;
}

/** Keys of the older `agent.*` block that have a home in `agents.defaults`. */
const AGENT_DEFAULT_KEYS = new Set(["model", "thinking", "timeoutSeconds", "sandbox", "subagents"]);

function mapLegacyAgent(doc: Doc, warnings: string[]): void {
  const agent = doc.agent;
  if (agent === undefined) return;
  delete doc.agent;
  if (!isObject(agent)) {
    warnings.push("agent: ignored (legacy key, not an object)");
    return;
  }
  for (const [key, value] of Object.entries(agent)) {
    if (AGENT_DEFAULT_KEYS.has(key)) moveTo(doc, `agent.${key}`, ["agents", "defaults", key], value, warnings);
    else warnings.push(`agent.${key}: ignored (not used by Switchboard)`);
  }
}

/** The longest run timeout a config may set: 30 days, as sessions_spawn's runTimeoutSeconds (src/tools/sessions-spawn-schema.ts). */
const MAX_TIMEOUT_SECONDS = 30 * 24 * 3600;

/** Ranges OpenClaw clamps at run time instead of refusing the config (docs/openclaw-carry-over.md). */
const CLAMPED: { path: string[]; min: number; max: number; integer: boolean }[] = [
  { path: ["session", "agentToAgent", "maxPingPongTurns"], min: 0, max: 5, integer: true },
  // Timeouts have a maximum like every input (docs/limits.md): 30 days, as sessions_spawn's runTimeoutSeconds,
  // so every deadline is a real time; OpenClaw accepts larger values, so they are clamped, not refused.
  { path: ["agents", "defaults", "timeoutSeconds"], min: 1, max: MAX_TIMEOUT_SECONDS, integer: true },
  { path: ["agents", "defaults", "subagents", "runTimeoutSeconds"], min: 0, max: MAX_TIMEOUT_SECONDS, integer: false },
  { path: ["agents", "defaults", "subagents", "announceTimeoutMs"], min: 1, max: 2_147_000_000, integer: true },
];

function clampNumbers(doc: Doc, warnings: string[]): void {
  for (const { path, min, max, integer } of CLAMPED) {
    const parent = objectAt(doc, path.slice(0, -1), false);
    const leaf = path[path.length - 1];
    const value = parent?.[leaf];
    if (typeof value !== "number" || !Number.isFinite(value)) continue; // a non-number stays invalid: a 500 naming it
    const clamped = Math.min(max, Math.max(min, integer ? Math.floor(value) : value));
    if (clamped !== value) {
      parent![leaf] = clamped;
      warnings.push(`${path.join(".")}: ${value} clamped to ${clamped} (range ${min}–${max})`);
    }
  }
}

/**
 * Legacy send-policy rules matched on `provider`, renamed `channel`. Dropping it would widen a deny
 * rule to every channel (test/config-carry-over.test.ts), so it is mapped; the match schema is strict,
 * so any other unknown matcher fails the config instead of widening a rule.
 */
function mapSendPolicyProvider(doc: Doc, warnings: string[]): void {
  const rules = objectAt(doc, ["session", "sendPolicy"], false)?.rules;
  if (!Array.isArray(rules)) return;
  rules.forEach((rule, i) => {
    const match = isObject(rule) ? rule.match : undefined;
    if (!isObject(match) || match.provider === undefined) return;
    const path = `session.sendPolicy.rules.${i}.match`;
    if (match.channel === undefined) {
      match.channel = match.provider;
      warnings.push(`${path}.provider: mapped to ${path}.channel`);
    } else if (match.channel === match.provider) {
      warnings.push(`${path}.provider: ignored (same as ${path}.channel)`);
    } else {
      // Both set and different: the current key wins, as for every other legacy key.
      warnings.push(
        `${path}.provider: ignored ("${String(match.provider)}"; ${path}.channel "${String(match.channel)}" is set and wins)`,
      );
    }
    delete match.provider;
  });
}

/** OpenClaw reads rule actions and chat types case-insensitively, with `dm` meaning `direct` (src/policy/send-policy.ts). */
function normaliseSendPolicyValues(doc: Doc, warnings: string[]): void {
  const policy = objectAt(doc, ["session", "sendPolicy"], false);
  if (!policy) return;
  const lower = (holder: Doc, key: string, path: string, alias?: Record<string, string>) => {
    const v = holder[key];
    if (typeof v !== "string") return;
    const s = v.trim().toLowerCase();
    const mapped = alias?.[s] ?? s;
    if (mapped !== v) {
      holder[key] = mapped;
      warnings.push(`${path}: "${v}" mapped to "${mapped}"`);
    }
  };
  lower(policy, "default", "session.sendPolicy.default");
  if (!Array.isArray(policy.rules)) return;
  policy.rules.forEach((rule, i) => {
    if (!isObject(rule)) return;
    lower(rule, "action", `session.sendPolicy.rules.${i}.action`);
    if (isObject(rule.match))
      lower(rule.match, "chatType", `session.sendPolicy.rules.${i}.match.chatType`, { dm: "direct" });
  });
}

/**
 * OpenClaw's sandbox mode `non-main` sandboxes every session but the main one; sandboxing here is per
 * agent, so it maps to the safe side, `all` (the main session is then sandboxed too).
 */
function mapSandboxModes(doc: Doc, warnings: string[]): void {
  const targets: [Doc | undefined, string][] = [
    [objectAt(doc, ["agents", "defaults", "sandbox"], false), "agents.defaults.sandbox.mode"],
  ];
  const list = objectAt(doc, ["agents"], false)?.list;
  if (Array.isArray(list))
    for (const [i, a] of list.entries())
      targets.push([isObject(a) && isObject(a.sandbox) ? a.sandbox : undefined, `agents.list.${i}.sandbox.mode`]);
  for (const [sandbox, path] of targets) {
    if (sandbox?.mode !== "non-main") continue;
    sandbox.mode = "all";
    warnings.push(`${path}: "non-main" mapped to "all" (sandboxing is per agent here, so main is sandboxed too)`);
  }
}

/**
 * OpenClaw's object form `{enabled?, spawnSubagentSessions?, idleHours?, maxAgeHours?}` → our boolean:
 * thread-bound spawns are opt-in per channel (`spawnSubagentSessions`), off when the channel or
 * `session.threadBindings` disables bindings.
 */
function mapThreadBindings(doc: Doc, warnings: string[]): void {
  const sessionTb = objectAt(doc, ["session"], false)?.threadBindings;
  const globalEnabled = isObject(sessionTb) ? sessionTb.enabled !== false : true;
  if (sessionTb !== undefined) {
    delete (doc.session as Doc).threadBindings;
    warnings.push(
      `session.threadBindings: ${globalEnabled ? "ignored" : "enabled: false applied to every channel"} (idle and age limits are not enforced)`,
    );
  }
  const channels = isObject(doc.channels) ? doc.channels : {};
  for (const [name, ch] of Object.entries(channels)) {
    if (!isObject(ch)) continue;
    const tb = ch.threadBindings;
    if (isObject(tb)) {
      const on = globalEnabled && tb.enabled !== false && tb.spawnSubagentSessions === true;
      ch.threadBindings = on;
      const ignored = Object.keys(tb).filter((k) => k !== "enabled" && k !== "spawnSubagentSessions");
      warnings.push(
        `channels.${name}.threadBindings: object form mapped to ${on}${ignored.length ? ` (ignored: ${ignored.join(", ")})` : ""}`,
      );
    } else if (tb === true && !globalEnabled) {
      ch.threadBindings = false;
    }
  }
}

function mapProviderApis(doc: Doc, warnings: string[]): void {
  const providers = objectAt(doc, ["models", "providers"], false);
  if (!providers) return;
  for (const [id, p] of Object.entries(providers)) {
    if (!isObject(p)) continue;
    if (p.api === "openai") {
      p.api = "openai-completions";
      warnings.push(`models.providers.${id}.api: "openai" mapped to "openai-completions"`);
    } else if (typeof p.api === "string" && !(PROVIDER_APIS as readonly string[]).includes(p.api)) {
      // The gateway stays up; a model of this provider is refused by name when an agent uses it.
      delete providers[id];
      warnings.push(
        `models.providers.${id}: ignored (api "${p.api}" is not supported; use one of ${PROVIDER_APIS.join(", ")})`,
      );
    }
  }
}

import { AGENT_ID_RE } from "../keys";

/**
 * OpenClaw configs carry over (docs/openclaw-carry-over.md). Before the CONFIG document is validated,
 * legacy key names move to their current place (this file), then values OpenClaw accepts but the schema
 * would refuse are clamped or mapped (src/config/carry-over-values.ts). Every such change is one warning.
 * The gateway then stays up on an OpenClaw config; only a value that is still invalid fails (a 500 naming
 * the path, src/config/load.ts).
 *
 * Works on a copy of the raw JSON document; never throws.
 */

export type Doc = Record<string, unknown>;

export const isObject = (v: unknown): v is Doc => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Keys read only here, on their way to a current key (the schema reads the rest: src/config/schema.ts).
 * docs/openclaw-carry-over.md must list each (test/config/openclaw-carry-over-table.test.ts).
 */
export const LEGACY_KEYS = [
  "agents.list",
  "agents.list[].id",
  "agents.defaults.thinking",
  "agents.entries.*.thinking",
  "routing",
  "routing.agentToAgent",
  "routing.agents",
  "routing.defaultAgentId",
  "routing.sessions.mainKey",
  "agent",
  "agent.model",
  "agent.thinking",
  "agent.timeoutSeconds",
  "agent.sandbox",
  "agent.subagents",
  "session.threadBindings",
  "session.threadBindings.enabled",
  "session.threadBindings.spawnSessions",
  "channels.*.threadBindings.enabled",
  "channels.*.threadBindings.spawnSessions",
  "channels.*.threadBindings.spawnSubagentSessions",
  "channels.*.webhookUrl",
  "channels.*.webhookSecret",
  "session.sendPolicy.rules[].match.provider",
] as const;

export function objectAt(doc: Doc, path: string[], create: boolean): Doc | undefined {
  let node: Doc = doc;
  for (const key of path) {
    const next = node[key];
    if (isObject(next)) node = next;
    else if (create && next === undefined) node = node[key] = {};
    else return undefined;
  }
  return node;
}

/** Move `value` to `to` unless the current key is already set (the current key wins, as in OpenClaw). */
export function moveTo(doc: Doc, from: string, to: string[], value: unknown, warnings: string[]): void {
  const parent = objectAt(doc, to.slice(0, -1), true);
  const leaf = to[to.length - 1];
  if (!parent || parent[leaf] !== undefined) {
    warnings.push(`${from}: ignored (${to.join(".")} is set and wins)`);
    return;
  }
  parent[leaf] = value;
  warnings.push(`${from}: mapped to ${to.join(".")}`);
}

/** Legacy key names moved to their current place, in the order the warnings list them. */
export function moveLegacyKeys(doc: Doc, warnings: string[]): void {
  mapLegacyRouting(doc, warnings);
  mapLegacyAgent(doc, warnings);
  moveAgentList(doc, warnings);
  normaliseEntryIds(doc, warnings);
  moveThinkingKeys(doc, warnings);
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
const AGENT_DEFAULT_KEYS: Record<string, string> = {
  model: "model",
  thinking: "thinkingDefault",
  timeoutSeconds: "timeoutSeconds",
  sandbox: "sandbox",
  subagents: "subagents",
};

function mapLegacyAgent(doc: Doc, warnings: string[]): void {
  const agent = doc.agent;
  if (agent === undefined) return;
  delete doc.agent;
  if (!isObject(agent)) {
    warnings.push("agent: ignored (legacy key, not an object)");
    return;
  }
  for (const [key, value] of Object.entries(agent)) {
    const to = AGENT_DEFAULT_KEYS[key];
    if (to) moveTo(doc, `agent.${key}`, ["agents", "defaults", to], value, warnings);
    else warnings.push(`agent.${key}: ignored (not used by Switchboard)`);
  }
}

/**
 * OpenClaw's agent id normalisation: trimmed, lower-case, invalid characters → `-`, dashes trimmed,
 * at most 64 characters; nothing left → `fallback`.
 */
export function normaliseAgentId(raw: unknown, fallback: string): string {
  if (typeof raw !== "string") return fallback;
  const id = raw
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^[-_]+|-+$/g, "")
    .slice(0, 64)
    .replace(/-+$/, "");
  return AGENT_ID_RE.test(id) ? id : fallback;
}

/** A free id for a duplicate: `<id>-2`, `<id>-3`, … (OpenClaw's migration). */
function freeId(id: string, taken: Set<string>): string {
  if (!taken.has(id)) return id;
  for (let n = 2; ; n++) {
    const next = `${id.slice(0, 60)}-${n}`;
    if (!taken.has(next)) return next;
  }
}

/**
 * `agents.list: [{id, …}]` is OpenClaw's legacy roster, migrated at its start-up to `agents.entries`
 * keyed by id (the element without its id, in list order); when `agents.entries` is set it wins.
 */
function moveAgentList(doc: Doc, warnings: string[]): void {
  const agents = objectAt(doc, ["agents"], false);
  if (!agents || agents.list === undefined) return;
  const list = agents.list;
  delete agents.list;
  if (isObject(agents.entries)) {
    warnings.push("agents.list: ignored (agents.entries is set and wins)");
    return;
  }
  if (!Array.isArray(list)) {
    warnings.push("agents.list: ignored (expected a list of agents)");
    return;
  }
  const entries: Doc = {};
  const taken = new Set<string>();
  list.forEach((element, i) => {
    if (!isObject(element)) {
      warnings.push(`agents.list.${i}: ignored (not an object)`);
      return;
    }
    const { id: rawId, ...rest } = element;
    const normal = normaliseAgentId(rawId, "agent");
    const id = freeId(normal, taken);
    taken.add(id);
    if (normal !== (typeof rawId === "string" ? rawId.trim() : rawId))
      warnings.push(`agents.list.${i}.id: ${JSON.stringify(rawId ?? null)} read as "${normal}"`);
    if (id !== normal) warnings.push(`agents.list.${i}.id: duplicate "${normal}" moved to agents.entries.${id}`);
    entries[id] = rest;
  });
  agents.entries = entries;
  if (list.length > 0)
    warnings.push(
      "agents.list: legacy form, read as agents.entries (OpenClaw 2026 keys agents by id: agents.entries.<id>)",
    );
}

/** Entry keys are agent ids: normalised as OpenClaw does (`Main` is `main`), duplicates moved aside. */
function normaliseEntryIds(doc: Doc, warnings: string[]): void {
  const agents = objectAt(doc, ["agents"], false);
  if (!agents || !isObject(agents.entries)) return;
  const out: Doc = {};
  const taken = new Set<string>();
  for (const [key, value] of Object.entries(agents.entries)) {
    const normal = normaliseAgentId(key, "agent");
    const id = freeId(normal, taken);
    taken.add(id);
    if (id !== key)
      warnings.push(
        id === normal
          ? `agents.entries.${key}: read as agent id "${id}"`
          : `agents.entries.${key}: resolves to agent id "${normal}" like another entry; read as "${id}"`,
      );
    out[id] = value;
  }
  agents.entries = out;
}

/** Switchboard's earlier `thinking` is OpenClaw's `thinkingDefault` (`agents.defaults`, each entry). */
function moveThinkingKeys(doc: Doc, warnings: string[]): void {
  const holders: [Doc | undefined, string][] = [[objectAt(doc, ["agents", "defaults"], false), "agents.defaults"]];
  const entries = objectAt(doc, ["agents", "entries"], false);
  for (const [id, a] of Object.entries(entries ?? {})) if (isObject(a)) holders.push([a, `agents.entries.${id}`]);
  for (const [holder, path] of holders) {
    if (!holder || holder.thinking === undefined) continue;
    const value = holder.thinking;
    delete holder.thinking;
    if (holder.thinkingDefault !== undefined)
      warnings.push(`${path}.thinking: ignored (${path}.thinkingDefault is set and wins)`);
    else {
      holder.thinkingDefault = value;
      warnings.push(`${path}.thinking: mapped to ${path}.thinkingDefault`);
    }
  }
}

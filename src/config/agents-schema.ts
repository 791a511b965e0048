import { z } from "zod";
import { AGENT_ID_RE } from "../keys";
import { MAX_CONCURRENT_MAX } from "../lane/subagent-lane";
import { INDEX_SHARDS_MAX } from "../registry/shard-hash";
import { isAllowedRuntimeUrl, RUNTIME_URL_RULE } from "../runners/runtime-url";
import { THINKING_LEVELS } from "../runners/thinking";

/**
 * The `agents` block of CONFIG as OpenClaw 2026 writes it (docs/openclaw-carry-over.md): `agents.entries`
 * keyed by agent id (the legacy `agents.list` array is moved here before validation, src/config/carry-over.ts),
 * `agents.defaults`, and `agents.ownership`. The parsed block also carries the roster derived from it —
 * `roster` (the entries in order, each with its id, normalised runtime and whether it is the default) and
 * `defaultId` — so every reader asks one place which agents exist and which is the default.
 */

/** A model reference: `<provider>/<model>`, an alias, or OpenClaw's `{primary, fallbacks?}` (fallbacks are reported unused). */
export const modelRef = z.union([z.string(), z.object({ primary: z.string() }).transform((m) => m.primary)]);

const thinkingLevel = z.enum(THINKING_LEVELS);
const sandboxMode = z.enum(["off", "non-main", "all"]);
const announceDelivery = z.enum(["direct", "requester"]);

/** `agents.defaults.models` / `agents.entries.<id>.models`: per-model settings, of which aliases are read. */
const modelSettings = z.record(z.string(), z.object({ alias: z.string().optional() }));

const subagentDefaults = z.object({
  archiveAfterMinutes: z.number().min(0).default(60),
  runTimeoutSeconds: z.number().min(0).default(0),
  maxSpawnDepth: z.number().int().min(1).max(5).default(1),
  maxChildrenPerAgent: z.number().int().min(1).max(20).default(5),
  // Set: a gateway-wide cap of sub-agent task runs at once (OpenClaw's meaning); unset: 8 per agent (docs/subagent-lane.md).
  maxConcurrent: z.number().int().min(1).max(MAX_CONCURRENT_MAX).optional(),
  allowAgents: z.array(z.string()).optional(),
  requireAgentId: z.boolean().default(false),
  model: modelRef.optional(),
  thinking: z.string().optional(),
  announceTimeoutMs: z.number().int().min(1).max(2_147_000_000).default(120_000),
  /** How a requester hears back from its children (docs/subagents.md). Switchboard's own key. */
  announceDelivery: announceDelivery.default("direct"),
});

const agentSubagents = z.object({
  announceDelivery: announceDelivery.optional(),
  allowAgents: z.array(z.string()).optional(),
  requireAgentId: z.boolean().optional(),
  model: modelRef.optional(),
  thinking: z.string().optional(),
});

/**
 * `agents.defaults.compaction` (docs/compaction.md). Defaults are OpenClaw's; `reserveTokens` and
 * friends were retired by OpenClaw and are reported unused like any other key.
 */
const compaction = z.object({
  enabled: z.boolean().default(true),
  /** Model for summaries (`<provider>/<model>` or an alias); default: the session's model. */
  model: z.string().optional(),
  thinkingLevel: z.union([thinkingLevel, z.literal("inherit")]).optional(),
  timeoutSeconds: z.number().int().min(1).max(900).default(180),
  keepRecentTokens: z.number().int().min(0).default(20_000),
  recentTurnsPreserve: z.number().int().min(0).max(12).default(3),
  identifierPolicy: z.enum(["strict", "off"]).default("strict"),
  maxActiveTranscriptBytes: z.union([z.number().int().min(0), z.string()]).optional(),
});

/**
 * An agent's runtime. OpenClaw's are `embedded` (its own agent loop: here, the model runner) and `acp`
 * (an external coding harness, which this gateway cannot run); Switchboard adds `webhook` (a runtime
 * outside the Worker) and `model` (= embedded). Any other type makes the agent unavailable, not the config invalid.
 */
const runtime = z
  .object({
    type: z.string(),
    url: z.url().optional(),
    secret: z.string().optional(),
    // OpenClaw's ACP harness settings: read whole, so they are not reported key by key (the agent is unavailable).
    acp: z.unknown().optional(),
  })
  .superRefine((r, ctx) => {
    if (r.type === "webhook" && !r.url)
      ctx.addIssue({ code: "custom", path: ["url"], message: "required for a webhook runtime" });
    // Every run POST carries a run token: https only, plain http for a loopback host (src/runners/runtime-url.ts).
    if (r.type === "webhook" && r.url && !isAllowedRuntimeUrl(r.url))
      ctx.addIssue({ code: "custom", path: ["url"], message: RUNTIME_URL_RULE });
  });

const agentEntry = z.object({
  name: z.string().optional(),
  /** OpenClaw's legacy default marker (retired in its docs, still honoured by its code). */
  default: z.boolean().optional(),
  model: modelRef.optional(),
  models: modelSettings.optional(),
  thinkingDefault: thinkingLevel.optional(),
  sandbox: z.object({ mode: sandboxMode.optional() }).optional(),
  subagents: agentSubagents.optional(),
  runtime: runtime.optional(),
  /** Switchboard's own: the agent's system prompt. */
  systemPrompt: z.string().optional(),
  /** Switchboard's own: this agent's index shards, instead of session.indexShards (docs/scale.md). */
  indexShards: z.number().int().min(1).max(INDEX_SHARDS_MAX).optional(),
});

const agentDefaults = z.object({
  /** Unset: OpenClaw's default model resolution (src/runners/model-resolution.ts). */
  model: modelRef.optional(),
  models: modelSettings.optional(),
  thinkingDefault: thinkingLevel.optional(),
  /** OpenClaw's 48 h; 0 = no deadline (docs/contract.md, "Configuration"). */
  timeoutSeconds: z.number().int().min(0).default(172_800),
  sandbox: z
    .object({
      mode: sandboxMode.default("off"),
      sessionToolsVisibility: z.enum(["spawned", "all"]).default("spawned"),
    })
    .prefault({}),
  subagents: subagentDefaults.prefault({}),
  compaction: compaction.prefault({}),
  /** OpenClaw's owner of ambient work; here the default agent of an explicit multi-agent roster. */
  systemAgent: z.object({ agentId: z.string().optional() }).optional(),
});

export type AgentEntry = z.infer<typeof agentEntry>;

/** What runs an agent's sessions, normalised: `unavailable` keeps the type the config asked for. */
export type AgentRuntime =
  | { type: "model" }
  | { type: "webhook"; url: string; secret?: string }
  | { type: "unavailable"; requested: string };

/** One agent of the roster: its entry, its id, its runtime normalised, and whether it is the default. */
export type AgentConfig = Omit<AgentEntry, "runtime" | "default"> & {
  id: string;
  default: boolean;
  runtime: AgentRuntime;
};

function normaliseRuntime(r: AgentEntry["runtime"]): AgentRuntime {
  const type = r?.type.trim().toLowerCase() ?? "model";
  if (type === "model" || type === "embedded") return { type: "model" };
  if (type === "webhook" && r?.url) return { type: "webhook", url: r.url, ...(r.secret ? { secret: r.secret } : {}) };
  return { type: "unavailable", requested: type };
}

/**
 * The default agent, as OpenClaw picks it: `agents.defaults.systemAgent.agentId` (an explicit fleet's
 * owner), else the entry marked `default: true`, else the first entry (sole agent, or a roster without
 * an owner: src/config/agent-checks.ts warns about that one).
 */
function defaultIdOf(ids: string[], entries: Record<string, AgentEntry>, systemAgent?: string): string {
  const owner = systemAgent?.trim().toLowerCase();
  if (owner && ids.includes(owner)) return owner;
  return ids.find((id) => entries[id].default === true) ?? ids[0];
}

export const agentsSchema = z
  .object({
    /** `"explicit"`: a multi-agent fleet whose default is `defaults.systemAgent.agentId`. */
    ownership: z.literal("explicit").optional(),
    defaults: agentDefaults.prefault({}),
    entries: z
      .record(z.string().regex(AGENT_ID_RE, "agent id must match [a-z0-9][a-z0-9_-]{0,63}"), agentEntry)
      .optional(),
  })
  .prefault({})
  .transform((a) => {
    // No roster at all is OpenClaw's implicit single agent `main`.
    const entries = a.entries && Object.keys(a.entries).length > 0 ? a.entries : { main: {} };
    const ids = Object.keys(entries);
    const defaultId = defaultIdOf(ids, entries, a.defaults.systemAgent?.agentId);
    const roster: AgentConfig[] = ids.map((id) => {
      const { runtime: r, default: _marker, ...rest } = entries[id];
      return { ...rest, id, default: id === defaultId, runtime: normaliseRuntime(r) };
    });
    return { ...a, entries, roster, defaultId };
  });

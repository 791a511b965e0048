import type { z } from "zod";
import type { Config } from "../config/schema";
import { invalid, notFound } from "../errors";
import { issueField, issueText } from "../zod-issue-text";
import { agentsList, agentsListSchema } from "./agents-list";
import type { Caller, ToolContext } from "./context";
import { sessionsHistory, sessionsHistorySchema } from "./sessions-history";
import { sessionsList, sessionsListSchema } from "./sessions-list";

/**
 * The one tool registry: each tool's zod schema and handler serve `/tools/invoke`, `/mcp`, the
 * OpenAPI document, the JSON-Schema export and the tools offered to models inside runs.
 */
export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  schema: S;
  handler: (ctx: ToolContext, args: z.infer<S>) => Promise<unknown>;
  /** Refuse arguments that need their own message before the schema sees them (throws a 400). */
  rejectArgs?: (args: Record<string, unknown>) => void;
}

function defineTool<S extends z.ZodObject>(def: ToolDefinition<S>): ToolDefinition {
  return def as unknown as ToolDefinition;
}

export const TOOLS: ToolDefinition[] = [
  defineTool({
    name: "sessions_list",
    description:
      "List visible sessions with optional filters for kind, recent activity, and last messages. Use this to discover a target session before calling sessions_history or sessions_send.",
    schema: sessionsListSchema,
    handler: sessionsList,
  }),
  defineTool({
    name: "sessions_history",
    description:
      "Fetch sanitized message history for a visible session. Supports limits, optional tool messages and a `before` cursor (nextBefore) to page back through long transcripts. Secrets are redacted and long texts capped.",
    schema: sessionsHistorySchema,
    handler: sessionsHistory,
  }),
  defineTool({
    name: "agents_list",
    description: "List agent ids you can target with `sessions_spawn` (based on subagent allowlists).",
    schema: agentsListSchema,
    handler: (ctx) => agentsList(ctx),
  }),
];

/** Register a tool (send/spawn live in their own modules and add themselves here). */
export function registerTool(def: ToolDefinition): void {
  const at = TOOLS.findIndex((t) => t.name === def.name);
  if (at >= 0) TOOLS[at] = def;
  else TOOLS.push(def);
}

export const SESSION_TOOL_NAMES = new Set([
  "sessions_list",
  "sessions_history",
  "sessions_send",
  "sessions_spawn",
  "agents_list",
]);

/**
 * Session tools an orchestrator sub-agent (depth < maxSpawnDepth) keeps by default, so raising
 * maxSpawnDepth is enough to let it spawn and read its own children (test/subagent-descendants.test.ts). A leaf — every
 * sub-agent at the default maxSpawnDepth 1 — keeps none; sessions_send and agents_list need an allow.
 */
const ORCHESTRATOR_TOOLS = ["sessions_spawn", "sessions_list", "sessions_history"];

/**
 * Tools a caller may use. Sub-agents get the full set minus session tools (orchestrators keep the
 * ones above) unless `tools.subagents.tools` allows more (deny wins) — enforced here for every call,
 * not only by prompt.
 */
export function toolsFor(caller: Pick<Caller, "isSubagent" | "spawnDepth">, cfg: Config): ToolDefinition[] {
  if (!caller.isSubagent) return TOOLS;
  const policy = cfg.tools.subagents.tools ?? {};
  const orchestrator = (caller.spawnDepth ?? 1) < cfg.agents.defaults.subagents.maxSpawnDepth;
  const allow = new Set([
    ...(orchestrator ? ORCHESTRATOR_TOOLS : []),
    ...(policy.allow ?? []),
    ...(policy.alsoAllow ?? []),
  ]);
  const deny = new Set(policy.deny ?? []);
  return TOOLS.filter((t) => !deny.has(t.name) && (!SESSION_TOOL_NAMES.has(t.name) || allow.has(t.name)));
}

export function findTool(caller: Pick<Caller, "isSubagent" | "spawnDepth">, cfg: Config, name: string): ToolDefinition {
  const t = toolsFor(caller, cfg).find((x) => x.name === name);
  if (!t) {
    const exists = TOOLS.some((x) => x.name === name);
    throw notFound(exists ? `Tool not available for this session: ${name}` : `Unknown tool: ${name}`);
  }
  return t;
}

/** Accept snake_case spellings of every parameter (test/sessions-list.test.ts), then validate with the tool's schema. */
export function parseToolArgs(tool: ToolDefinition, raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid("args: expected an object");
  const args: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    const camel = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    // String params are trimmed; an empty string counts as absent, as in OpenClaw.
    const value = typeof v === "string" ? v.trim() : v;
    if (value === "") continue;
    if (!(camel in args)) args[camel] = value;
  }
  tool.rejectArgs?.(args);
  const parsed = tool.schema.safeParse(args);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // Strict schemas (sessions_spawn): an unknown parameter is named, never dropped in silence.
    if (issue.code === "unrecognized_keys") throw invalid(`${issue.keys[0]}: unknown parameter for ${tool.name}`);
    const field = issueField(issue, "args");
    // zod 4 issues omit `input` unless asked, so "missing" is read from the args themselves.
    const missing =
      issue.code === "invalid_type" && issue.path.length === 1 && args[String(issue.path[0])] === undefined;
    throw invalid(missing ? `${field} required` : issueText(issue, "args"));
  }
  return parsed.data as Record<string, unknown>;
}

export async function invokeTool(ctx: ToolContext, name: string, rawArgs: unknown): Promise<unknown> {
  const tool = findTool(ctx.caller, ctx.cfg, name);
  const args = parseToolArgs(tool, rawArgs);
  return tool.handler(ctx, args);
}

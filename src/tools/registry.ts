import type { Config } from "../config/schema";
import { invalid, notFound } from "../errors";
import { issueField, issueText } from "../zod-issue-text";
import { agentsListTool } from "./agents-list";
import type { Caller, ToolContext } from "./context";
import type { ToolDefinition } from "./definition";
import { sessionStatusTool } from "./session-status";
import { sessionsHistoryTool } from "./sessions-history";
import { sessionsListTool } from "./sessions-list";
import { sessionsSearchTool } from "./sessions-search";
import { sessionsSendTool } from "./sessions-send";
import { sessionsSpawnTool } from "./sessions-spawn";
import { sessionsYieldTool } from "./sessions-yield";
import { subagentsTool } from "./subagents";

export type { ToolDefinition } from "./definition";

/**
 * The one tool registry: every tool, in the order callers see them (MCP tools/list, /v1/tools, the
 * OpenAPI document, the tools a model is offered). A tool is a module exporting `defineTool({...})`
 * (src/tools/definition.ts); adding one is a line here (AGENTS.md, "Add a tool"; test/recipes.test.ts
 * fails on a tool module missing from this list).
 */
export const TOOLS: readonly ToolDefinition[] = [
  sessionsListTool,
  sessionsHistoryTool,
  sessionsSearchTool,
  agentsListTool,
  sessionsSendTool,
  sessionsSpawnTool,
  sessionStatusTool,
  sessionsYieldTool,
  subagentsTool,
];

/**
 * Tools a caller may use. Main sessions get every tool. Sub-agents get the tools whose definition says
 * `subagents: "all"`, orchestrators (depth < maxSpawnDepth) also those marked `"orchestrators"` — so
 * raising maxSpawnDepth is enough to let a sub-agent spawn and read its own children
 * (test/spawn/subagent-descendants.test.ts) — and `tools.subagents.tools` allows more (deny wins). Enforced here
 * for every call, not only by prompt.
 */
export function toolsFor(caller: Pick<Caller, "isSubagent" | "spawnDepth">, cfg: Config): readonly ToolDefinition[] {
  if (!caller.isSubagent) return TOOLS;
  const policy = cfg.tools.subagents.tools ?? {};
  const orchestrator = (caller.spawnDepth ?? 1) < cfg.agents.defaults.subagents.maxSpawnDepth;
  const allow = new Set([...(policy.allow ?? []), ...(policy.alsoAllow ?? [])]);
  const deny = new Set(policy.deny ?? []);
  return TOOLS.filter(
    (t) =>
      !deny.has(t.name) &&
      (t.subagents === "all" || allow.has(t.name) || (orchestrator && t.subagents === "orchestrators")),
  );
}

export function findTool(caller: Pick<Caller, "isSubagent" | "spawnDepth">, cfg: Config, name: string): ToolDefinition {
  const t = toolsFor(caller, cfg).find((x) => x.name === name);
  if (!t) {
    const exists = TOOLS.some((x) => x.name === name);
    throw notFound(exists ? `Tool not available for this session: ${name}` : `Unknown tool: ${name}`);
  }
  return t;
}

/** Accept snake_case spellings of every parameter (test/tools/sessions-list.test.ts), then validate with the tool's schema. */
export function parseToolArgs(tool: ToolDefinition, raw: unknown): Record<string, unknown> {
  if (raw === undefined) raw = {};
  // `null` is not "no arguments": refused as /tools/invoke's schema refuses it (src/http/routes/tools.ts).
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw invalid("args: expected an object (omit args, or send {}, for no arguments)");
  const args: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    const camel = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    // String params are trimmed; an empty string counts as absent, as in OpenClaw.
    const value = typeof v === "string" ? v.trim() : v;
    if (value === "" && !tool.keepEmpty?.includes(camel)) continue;
    if (!(camel in args)) args[camel] = value;
  }
  tool.rejectArgs?.(args);
  const parsed = tool.schema.safeParse(args);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // Every tool's schema is strict: unknown parameters are named (all of them), never dropped in silence.
    if (issue.code === "unrecognized_keys")
      throw invalid(
        issue.keys.length === 1
          ? `${issue.keys[0]}: unknown parameter for ${tool.name}`
          : `${issue.keys.join(", ")}: unknown parameters for ${tool.name}`,
      );
    const field = issueField(issue, "args");
    // zod 4 issues omit `input` unless asked, so "missing" is read from the args themselves.
    const missing =
      issue.code === "invalid_type" && issue.path.length === 1 && args[String(issue.path[0])] === undefined;
    throw invalid(missing ? `${field} required` : issueText(issue, "args"));
  }
  return parsed.data as Record<string, unknown>;
}

/**
 * The text block of a tool result: the payload's compact JSON, or the tool's own text (`resultText`,
 * session_status's card) — the payload itself is always the structured part (`details`, `structuredContent`).
 */
export function toolResultText(name: string, payload: unknown): string {
  return toolOwnText(name, payload) ?? JSON.stringify(payload);
}

/** The tool's own text block (`resultText`), when it has one for this payload; undefined: the text is the JSON. */
export function toolOwnText(name: string, payload: unknown): string | undefined {
  return TOOLS.find((t) => t.name === name)?.resultText?.(payload);
}

export async function invokeTool(ctx: ToolContext, name: string, rawArgs: unknown): Promise<unknown> {
  const tool = findTool(ctx.caller, ctx.cfg, name);
  const args = parseToolArgs(tool, rawArgs);
  return tool.handler(ctx, args);
}

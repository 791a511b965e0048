import { ProtocolError, ProtocolErrorCode, type Server } from "@modelcontextprotocol/server";
import { fromRpcError, SwitchboardError } from "../errors";
import { log } from "../log";
import type { ToolContext } from "../tools/context";
import { isRefusal } from "../tools/context";
import { describeTool } from "../tools/json-schema";
import { findTool, invokeTool, TOOLS, type ToolDefinition, toolResultText, toolsFor } from "../tools/registry";
import { type ProgressToken, withProgress } from "./mcp-progress";
import { installTasks, TaskServer, taskCapabilities } from "./mcp-task-handlers";
import type { TaskFlavour } from "./mcp-tasks";
import type { Principal } from "./principal";

/**
 * What `/mcp` serves, on the official MCP server SDK (`@modelcontextprotocol/server`): the caller's tools
 * from the one registry (src/tools/registry.ts) — a tool added to `TOOLS` appears here with no edit —
 * called through the same `invokeTool` as `/tools/invoke`. One SDK `Server` per request (stateless
 * serving, src/http/mcp.ts): the caller is fixed when the request arrives.
 */

export const MCP_SERVER_INFO = { name: "switchboard", version: "0.1.0" } as const;

export const MCP_INSTRUCTIONS =
  "Switchboard session tools: find sessions (sessions_list), read them (sessions_history), talk to them (sessions_send) and hand work to sub-agents (sessions_spawn, agents_list). Session keys look like agent:<agentId>:<rest>; `main` is your agent's main session.";

/**
 * MCP clients time a request out after 60 s by default, so a server-side wait must end before that.
 * Tools that wait (their definition's `wait`) have that argument capped over MCP; the wait ends with
 * the run still going (status "timeout"), and the caller polls as the description says.
 */
export const MCP_MAX_WAIT_SECONDS = 50;
const waitOf = (toolName: string) => TOOLS.find((t) => t.name === toolName)?.wait;

/** The description a model sees over MCP: the registry's, plus the MCP wait cap where one applies. */
function mcpDescription(def: ToolDefinition): string {
  const waitArg = def.wait?.argument;
  if (!waitArg) return def.description;
  return `${def.description} Over MCP, \`${waitArg}\` is capped at ${MCP_MAX_WAIT_SECONDS} seconds (MCP clients time requests out after 60 s); a longer run returns status "timeout" and keeps going — read its reply later with sessions_history, or pass ${waitArg}: 0 to fire and forget.`;
}

/**
 * One tool as MCP lists it: name, description, JSON Schema of its zod schema, and — for a tool that can
 * answer with its run as a task (`task: true`, src/http/mcp-tasks.ts) — `execution.taskSupport: "optional"`
 * (2025-11-25; the SDK drops the field on 2026-07-28, whose tasks extension has no per-tool declaration).
 */
export function mcpTool(def: ToolDefinition) {
  const d = describeTool(def, mcpDescription(def));
  return {
    name: d.name,
    description: d.description,
    inputSchema: d.parameters as { type: "object" },
    ...(def.task ? { execution: { taskSupport: "optional" as const } } : {}),
  };
}

/** Cap the wait argument of a waiting tool (accepting its snake_case spelling too, as the registry does). */
export function capMcpWait(toolName: string, rawArgs: unknown): unknown {
  const waitArg = waitOf(toolName)?.argument;
  if (!waitArg || typeof rawArgs !== "object" || rawArgs === null || Array.isArray(rawArgs)) return rawArgs;
  const args = { ...(rawArgs as Record<string, unknown>) };
  for (const [k, v] of Object.entries(args)) {
    const camel = k.replace(/_([a-z])/g, (_, ch: string) => ch.toUpperCase());
    if (camel === waitArg && typeof v === "number" && v > MCP_MAX_WAIT_SECONDS) args[k] = MCP_MAX_WAIT_SECONDS;
  }
  return args;
}

/** The wait in seconds a call of a waiting tool will make over MCP (capped); undefined for other tools. */
export function mcpWaitSeconds(toolName: unknown, rawArgs: unknown): number | undefined {
  const spec = typeof toolName === "string" ? waitOf(toolName) : undefined;
  if (!spec) return undefined;
  const args = (capMcpWait(toolName as string, rawArgs) ?? {}) as Record<string, unknown>;
  const snake = spec.argument.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`);
  const wait = args[spec.argument] ?? args[snake];
  // Absent: the tool's default wait.
  return typeof wait === "number" ? wait : spec.defaultSeconds;
}

/** A tool result in MCP form: the payload as text (as `/tools/invoke` renders it) and as structured content. */
function toolCallResult(name: string, payload: unknown, isError: boolean) {
  const structured = (
    typeof payload === "object" && payload !== null && !Array.isArray(payload) ? payload : { result: payload }
  ) as Record<string, unknown>;
  return {
    content: [{ type: "text" as const, text: toolResultText(name, payload) }],
    structuredContent: structured,
    ...(isError ? { isError: true } : {}),
  };
}

const errorResult = (text: string) => ({ content: [{ type: "text" as const, text }], isError: true });

async function callTool(ctx: ToolContext, name: string, args: unknown, requestId: string) {
  // Unknown tools and tools outside the caller's set are protocol errors (MCP spec), with the REST texts.
  try {
    findTool(ctx.caller, ctx.cfg, name);
  } catch (err) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, err instanceof Error ? err.message : String(err));
  }
  try {
    const payload = await invokeTool(ctx, name, capMcpWait(name, args));
    // Refusals the spec defines as results are tool errors over MCP, with the same payload and text.
    return toolCallResult(name, payload, isRefusal(payload));
  } catch (err) {
    const e = fromRpcError(err);
    // Bad arguments and scope refusals are reported to the model as tool errors it can correct.
    if (e instanceof SwitchboardError && e.status < 500) return errorResult(e.message);
    log.error("mcp_tool_call_failed", { requestId, tool: name, error: err });
    return errorResult("Internal error");
  }
}

/**
 * The SDK server for one request of `ctx.caller`: tools/list and tools/call over the registry. A waiting
 * call that carries a progress token reports progress while it waits (src/http/mcp-progress.ts). The task
 * methods of the request's flavour (2025-11-25 core tasks, or the 2026-07-28 extension) run over the runs
 * the caller's principal may read (src/http/mcp-task-handlers.ts).
 */
export function mcpServer(ctx: ToolContext, requestId: string, principal: Principal, flavour: TaskFlavour): Server {
  const server = new TaskServer(MCP_SERVER_INFO, {
    capabilities: { tools: { listChanged: false }, ...taskCapabilities(flavour) },
    instructions: MCP_INSTRUCTIONS,
  });
  server.setRequestHandler("tools/list", async () => ({ tools: toolsFor(ctx.caller, ctx.cfg).map(mcpTool) }));
  server.setRequestHandler("tools/call", async (req, rc) => {
    const { name, arguments: args } = req.params;
    const work = callTool(ctx, name, args, requestId);
    const token = rc.mcpReq._meta?.progressToken as ProgressToken | undefined;
    const waitSeconds = mcpWaitSeconds(name, args);
    // No token, or no wait (0, or a tool that answers at once): nothing to report progress on.
    if (token === undefined || !waitSeconds) return work;
    return withProgress({ token, waitSeconds, what: name, notify: (n) => rc.mcpReq.notify(n) }, work);
  });
  installTasks(server, {
    ctx,
    principal,
    flavour,
    call: (name, args) => callTool(ctx, name, args, requestId),
    waitSeconds: mcpWaitSeconds,
    maxWaitMs: MCP_MAX_WAIT_SECONDS * 1000,
  });
  return server;
}

import type { Context } from "hono";
import { resolver } from "hono-openapi";
import { z } from "zod";
import { fromRpcError, SwitchboardError } from "../errors";
import { log } from "../log";
import type { ToolContext } from "../tools/context";
import { isRefusal } from "../tools/context";
import { describeTool } from "../tools/json-schema";
import { findTool, invokeTool, TOOLS, type ToolDefinition, toolResultText, toolsFor } from "../tools/registry";
import type { AppEnv } from "./app-env";
import { requesterOf } from "./auth";
import { progressOf, progressStream } from "./mcp-progress";
import type { RouteDoc } from "./route-doc";
import { MCP_TEXT } from "./route-texts";

/**
 * `/mcp` (docs/contract.md, "Endpoints"): a stateless MCP Streamable-HTTP endpoint over the one tool registry.
 *
 * Stateless on purpose: every POST carries one JSON-RPC message (or a batch) and gets a JSON answer (or,
 * for a waiting call that asked for progress, an SSE answer to that request: mcp-progress.ts),
 * no `Mcp-Session-Id`, no server-held stream — any Worker instance can answer any request, and the
 * tools' own state lives in the session objects. The surface is small (initialize, ping, tools/list,
 * tools/call), so it is implemented here rather than pulling the SDK's server (and its JSON-Schema
 * compiler) into the Worker bundle; the test drives it with the official SDK client.
 */

const MCP_PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const;
const LATEST_PROTOCOL_VERSION = MCP_PROTOCOL_VERSIONS[0];

/**
 * MCP clients time a request out after 60 s by default, so a server-side wait must end before that.
 * Tools that wait (their definition's `wait`) have that argument capped over MCP; the wait ends with
 * the run still going (status "timeout"), and the caller polls as the description says.
 */
export const MCP_MAX_WAIT_SECONDS = 50;
const waitOf = (toolName: string) => TOOLS.find((t) => t.name === toolName)?.wait;
/** Messages in one JSON-RPC batch at most (docs/limits.md): each may be a tool call, answered one after another. */
export const MCP_MAX_BATCH = 20;

const jsonRpcId = z.union([z.string(), z.number(), z.null()]);
/** A JSON-RPC 2.0 request or notification, as documented; the handler checks each message itself (below). */
const jsonRpcRequestSchema = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: jsonRpcId.optional().describe("Absent for a notification (answered 202 with no body)"),
    method: z.string().describe("initialize, ping, tools/list or tools/call"),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: "JsonRpcRequest" });
const jsonRpcResponseSchema = z
  .union([
    z.strictObject({ jsonrpc: z.literal("2.0"), id: jsonRpcId, result: z.unknown() }),
    z.strictObject({
      jsonrpc: z.literal("2.0"),
      id: jsonRpcId,
      error: z.strictObject({ code: z.number().int(), message: z.string() }),
    }),
  ])
  .meta({ id: "JsonRpcResponse" });

type JsonRpcId = z.infer<typeof jsonRpcId>;
/** What arrives before it is checked: any field may be missing or of the wrong type. */
type JsonRpcMessage = { [K in keyof z.infer<typeof jsonRpcRequestSchema>]?: unknown } & { id?: JsonRpcId };
type JsonRpcResponse = z.infer<typeof jsonRpcResponseSchema>;

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** The description a model sees over MCP: the registry's, plus the MCP wait cap where one applies. */
function mcpDescription(def: ToolDefinition): string {
  const waitArg = def.wait?.argument;
  if (!waitArg) return def.description;
  return `${def.description} Over MCP, \`${waitArg}\` is capped at ${MCP_MAX_WAIT_SECONDS} seconds (MCP clients time requests out after 60 s); a longer run returns status "timeout" and keeps going — read its reply later with sessions_history, or pass ${waitArg}: 0 to fire and forget.`;
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

/** The wait in seconds a call of a waiting tool will make over MCP (capped), undefined for other tools. */
function mcpWaitSeconds(toolName: string, rawArgs: unknown): number | undefined {
  const spec = waitOf(toolName);
  if (!spec) return undefined;
  const args = (capMcpWait(toolName, rawArgs) ?? {}) as Record<string, unknown>;
  const snake = spec.argument.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`);
  const wait = args[spec.argument] ?? args[snake];
  // Absent: the tool's default wait.
  return typeof wait === "number" ? wait : spec.defaultSeconds;
}

/** A tool result in MCP form: the payload as text (as `/tools/invoke` renders it) and as structured content. */
function toolCallResult(name: string, payload: unknown, isError: boolean) {
  const structured =
    typeof payload === "object" && payload !== null && !Array.isArray(payload) ? payload : { result: payload };
  return {
    content: [{ type: "text", text: toolResultText(name, payload) }],
    structuredContent: structured,
    ...(isError ? { isError: true } : {}),
  };
}

async function callTool(ctx: ToolContext, params: Record<string, unknown>, requestId: string) {
  const name = params.name;
  if (typeof name !== "string" || !name) throw new RpcError(INVALID_PARAMS, "params.name: expected a tool name");
  // Unknown tools and tools outside the caller's set are protocol errors (MCP spec), with the REST texts.
  try {
    findTool(ctx.caller, ctx.cfg, name);
  } catch (err) {
    throw new RpcError(INVALID_PARAMS, err instanceof Error ? err.message : String(err));
  }
  try {
    const payload = await invokeTool(ctx, name, capMcpWait(name, params.arguments));
    // Refusals the spec defines as results are tool errors over MCP, with the same payload and text.
    return toolCallResult(name, payload, isRefusal(payload));
  } catch (err) {
    const e = fromRpcError(err);
    // Bad arguments and scope refusals are reported to the model as tool errors it can correct.
    if (e instanceof SwitchboardError && e.status < 500)
      return { content: [{ type: "text", text: e.message }], isError: true };
    log.error("mcp_tool_call_failed", { requestId, tool: name, error: err });
    return { content: [{ type: "text", text: "Internal error" }], isError: true };
  }
}

async function dispatch(c: Context<AppEnv>, msg: JsonRpcMessage): Promise<unknown> {
  const params = (typeof msg.params === "object" && msg.params !== null ? msg.params : {}) as Record<string, unknown>;
  switch (msg.method) {
    case "initialize": {
      const asked = params.protocolVersion;
      const protocolVersion = (MCP_PROTOCOL_VERSIONS as readonly unknown[]).includes(asked)
        ? asked
        : LATEST_PROTOCOL_VERSION;
      return {
        protocolVersion,
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: "switchboard", version: "0.1.0" },
        instructions:
          "Switchboard session tools: find sessions (sessions_list), read them (sessions_history), talk to them (sessions_send) and hand work to sub-agents (sessions_spawn, agents_list). Session keys look like agent:<agentId>:<rest>; `main` is your agent's main session.",
      };
    }
    case "ping":
      return {};
    case "tools/list": {
      const { caller, cfg } = await toolContext(c);
      return { tools: toolsFor(caller, cfg).map(mcpTool) };
    }
    case "tools/call":
      return callTool(await toolContext(c), params, c.get("requestId"));
    default:
      throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${String(msg.method)}`);
  }
}

function mcpTool(def: ToolDefinition) {
  const d = describeTool(def, mcpDescription(def));
  return { name: d.name, description: d.description, inputSchema: d.parameters };
}

/** The requester session: `X-Session-Key`, else the token's main session (docs/contract.md, "Authentication and scopes"). */
async function toolContext(c: Context<AppEnv>): Promise<ToolContext> {
  const cfg = c.get("cfg");
  return { env: c.env, cfg, caller: await requesterOf(c, c.req.header("X-Session-Key")) };
}

async function answer(c: Context<AppEnv>, msg: unknown): Promise<JsonRpcResponse | null> {
  const m = (typeof msg === "object" && msg !== null && !Array.isArray(msg) ? msg : {}) as JsonRpcMessage;
  const hasId = typeof m.id === "string" || typeof m.id === "number";
  // Notifications (no id) and responses to server requests get no answer.
  if (!hasId)
    return m.jsonrpc === "2.0" && (typeof m.method === "string" || "result" in m || "error" in m)
      ? null
      : rpcError(null, INVALID_REQUEST, "Invalid JSON-RPC message");
  const id = m.id as JsonRpcId;
  if (m.jsonrpc !== "2.0" || typeof m.method !== "string")
    return rpcError(id, INVALID_REQUEST, "Invalid JSON-RPC request");
  try {
    return { jsonrpc: "2.0", id, result: await dispatch(c, m) };
  } catch (err) {
    if (err instanceof RpcError) return rpcError(id, err.code, err.message);
    const e = fromRpcError(err);
    // An HTTP-level refusal (e.g. X-Session-Key outside the token's scope) keeps its status and envelope.
    if (e instanceof SwitchboardError) throw e;
    log.error("mcp_request_failed", { requestId: c.get("requestId"), error: err });
    return rpcError(id, INTERNAL_ERROR, "Internal error");
  }
}

function rpcError(id: JsonRpcId, code: number, message: string): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

/** How /mcp appears in /openapi.json: a JSON-RPC body, JSON-RPC answers, and its non-envelope statuses. */
export const MCP_ROUTE_DOC: RouteDoc = {
  tag: "tools",
  summary: "MCP endpoint (stateless Streamable HTTP, JSON responses)",
  description: MCP_TEXT,
  sessionHeader: true,
  requestBody: {
    required: true,
    content: {
      "application/json": {
        schema: resolver(z.union([jsonRpcRequestSchema, z.array(jsonRpcRequestSchema).min(1).max(MCP_MAX_BATCH)])),
      },
    },
  },
  ok: {
    description: "The JSON-RPC response (an array of them for a batch)",
    schema: z.union([jsonRpcResponseSchema, z.array(jsonRpcResponseSchema)]),
  },
  errors: [403, 413],
  otherResponses: {
    202: { description: "Only notifications or responses were sent: nothing to answer" },
    400: {
      description: "Not JSON (-32700), an empty batch or one over 20 messages (-32600)",
      schema: jsonRpcResponseSchema,
    },
  },
};

/** POST /mcp: one JSON-RPC message or a batch; a single waiting tools/call that asked for progress is answered as SSE. */
export async function mcpEndpoint(c: Context<AppEnv>): Promise<Response> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return c.json(rpcError(null, PARSE_ERROR, "Parse error: the body must be a JSON-RPC message"), 400);
  }
  const batch = Array.isArray(body);
  const messages = batch ? (body as unknown[]) : [body];
  if (messages.length === 0) return c.json(rpcError(null, INVALID_REQUEST, "Empty batch"), 400);
  if (messages.length > MCP_MAX_BATCH)
    return c.json(
      rpcError(null, INVALID_REQUEST, `Batch too large: ${messages.length} messages (max ${MCP_MAX_BATCH})`),
      400,
    );
  // A single waiting tools/call with a progressToken is answered as SSE: progress notifications, then the response.
  const single = (batch ? null : body) as JsonRpcMessage | null;
  const progress =
    single?.method === "tools/call" && typeof single.params === "object" && single.params !== null
      ? progressOf(single.params as Record<string, unknown>, c.req.header("Accept"), mcpWaitSeconds)
      : null;
  if (progress) {
    // Authentication and scope refusals keep their HTTP status: checked before the stream starts.
    await toolContext(c);
    const name = String((single!.params as Record<string, unknown>).name);
    return progressStream(c, progress, name, answer(c, single));
  }
  const responses: JsonRpcResponse[] = [];
  for (const msg of messages) {
    const r = await answer(c, msg);
    if (r) responses.push(r);
  }
  // Only notifications or responses: accepted, nothing to say (Streamable HTTP).
  if (responses.length === 0) return c.body(null, 202);
  return c.json(batch ? responses : responses[0]);
}

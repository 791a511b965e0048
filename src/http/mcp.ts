import {
  createMcpHandler,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import type { Context } from "hono";
import { resolver } from "hono-openapi";
import { z } from "zod";
import { log } from "../log";
import type { ToolContext } from "../tools/context";
import { errorEnvelopeSchema, jsonRpcAnswerSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { requesterOf } from "./auth";
import { MCP_MAX_BATCH, MCP_PROTOCOL_VERSIONS, PARSE_ERROR, rpcRefusal, shapeRefusal } from "./mcp-guard";
import { progressTokenOf } from "./mcp-progress";
import { mcpServer, mcpWaitSeconds } from "./mcp-tools";
import type { RouteDoc } from "./route-doc";
import { MCP_TEXT } from "./route-texts";

export { MCP_MAX_BATCH } from "./mcp-guard";
export { capMcpWait, MCP_MAX_WAIT_SECONDS } from "./mcp-tools";

/**
 * `/mcp` (docs/contract.md, "Endpoints"; docs/protocols.md, "MCP"): the official MCP server SDK
 * (`@modelcontextprotocol/server`) serving the one tool registry (src/http/mcp-tools.ts), stateless.
 *
 * Stateless on purpose: every POST is answered by a fresh SDK server for its caller, with no
 * `Mcp-Session-Id` and no server-held stream — any Worker instance can answer any request, and the tools'
 * own state lives in the session objects. The current revision (per-request `_meta` envelope) is served by
 * the SDK's `createMcpHandler`; the 2025-era revisions by its Streamable HTTP transport in stateless mode,
 * answering one JSON body unless a waiting call asked for progress (then an SSE stream,
 * src/http/mcp-progress.ts). Before either: the host/origin rule (src/http/mcp-guard.ts, a middleware in
 * front of authentication), the protocol-version and batch rules, and the caller (`X-Session-Key`).
 */

/** The requester session: `X-Session-Key`, else the token's main session (docs/contract.md, "Authentication and scopes"). */
async function toolContext(c: Context<AppEnv>): Promise<ToolContext> {
  return { env: c.env, cfg: c.get("cfg"), caller: await requesterOf(c, c.req.header("X-Session-Key")) };
}

const BOTH = "application/json, text/event-stream";

/**
 * Whether a 2025-era request is answered as SSE: a single waiting tools/call that carries a progress
 * token from a client that accepts event streams. Everything else is one JSON body.
 */
function wantsStream(accept: string | undefined, body: unknown): boolean {
  if (!accept?.includes("text/event-stream") || typeof body !== "object" || body === null || Array.isArray(body))
    return false;
  const msg = body as { method?: unknown; params?: { name?: unknown; arguments?: unknown } };
  if (msg.method !== "tools/call" || progressTokenOf(msg.params) === undefined) return false;
  return (mcpWaitSeconds(msg.params?.name, msg.params?.arguments) ?? 0) > 0;
}

/** POST /mcp. */
export async function mcpEndpoint(c: Context<AppEnv>): Promise<Response> {
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    return c.json(rpcRefusal(PARSE_ERROR, "Parse error: the body must be a JSON-RPC message"), 400);
  }
  const refused = shapeRefusal(c.req.header("MCP-Protocol-Version"), body);
  if (refused) return c.json(rpcRefusal(refused.code, refused.message), 400);
  // Authentication and scope refusals keep their HTTP status and envelope: checked before the SDK answers.
  const ctx = await toolContext(c);
  const requestId = c.get("requestId");
  // Tasks are read by the token's own rights, as GET /v1/runs/{id} reads runs (src/http/mcp-tasks.ts).
  const principal = c.get("principal");
  const stream = wantsStream(c.req.header("Accept"), body);
  // The SDK answers 406 unless `Accept` lists both types (the transport spec's client MUST); a client that
  // lists one or neither still gets its JSON answer (`stream` above decides), so the request it sees says both.
  const headers = new Headers(c.req.raw.headers);
  headers.set("Accept", BOTH);
  const request = new Request(c.req.url, { method: "POST", headers, signal: c.req.raw.signal });
  try {
    if (!(await isLegacyRequest(request, body))) {
      // The current revision: its own dispatch and errors (unknown revisions, envelope checks) are the SDK's.
      const modern = createMcpHandler(() => mcpServer(ctx, requestId, principal, "2026"), {
        legacy: "reject",
        keepAliveMs: 0,
      });
      return await modern.fetch(request, { parsedBody: body });
    }
    const server = mcpServer(ctx, requestId, principal, "2025");
    // keepAliveMs 0: the only stream is a progress stream, whose notifications are its heartbeat.
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: !stream, keepAliveMs: 0 });
    await server.connect(transport);
    const res = await transport.handleRequest(request, { parsedBody: body });
    // A JSON answer is complete: nothing of this request's server is needed any more.
    if (!stream) await server.close();
    return res;
  } catch (err) {
    log.error("mcp_request_failed", { requestId, error: err });
    return c.json(rpcRefusal(-32603, "Internal error"), 500);
  }
}

/** A JSON-RPC 2.0 request or notification, as documented; the SDK checks each message itself. */
const jsonRpcRequestSchema = z
  .object({
    jsonrpc: z.literal("2.0"),
    // A request's id is a string or an integer (never null): what the SDK's transport takes.
    id: z
      .union([z.string(), z.number().int()])
      .optional()
      .describe("Absent for a notification (answered 202 with no body)"),
    method: z
      .string()
      .describe(
        "initialize, ping, tools/list, tools/call, tasks/get, tasks/result, tasks/list or tasks/cancel (server/discover on 2026-07-28, without tasks/result and tasks/list)",
      ),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: "JsonRpcRequest" });
const jsonRpcResponseSchema = jsonRpcAnswerSchema("JsonRpcResponse");

/** How /mcp appears in /openapi.json: a JSON-RPC body, JSON-RPC answers, and its non-envelope statuses. */
export const MCP_ROUTE_DOC: RouteDoc = {
  tag: "tools",
  summary: "MCP endpoint (stateless Streamable HTTP, official MCP SDK)",
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
  errors: [413],
  otherResponses: {
    202: { description: "Only notifications or responses were sent: nothing to answer" },
    400: {
      description: `Not JSON (-32700); an empty batch, one over ${MCP_MAX_BATCH} messages, or a batch under protocol 2025-06-18 or later (-32600); an \`MCP-Protocol-Version\` other than ${MCP_PROTOCOL_VERSIONS.join(", ")}`,
      schema: jsonRpcResponseSchema,
    },
    415: {
      description: "A `Content-Type` other than `application/json` (JSON-RPC error -32000)",
      schema: jsonRpcResponseSchema,
    },
    403: {
      description:
        "An `Origin` (or, with `mcp.allowedHosts`, a host) that may not call /mcp (JSON-RPC error), or an `X-Session-Key` outside the token's scope (error envelope)",
      schema: z.union([jsonRpcResponseSchema, errorEnvelopeSchema]),
    },
  },
};

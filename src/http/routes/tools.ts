import { Hono } from "hono";
import { endTime, startTime } from "hono/timing";
import { z } from "zod";
import { describeTool, toolArgsSchema } from "../../tools/json-schema";
import {
  findTool,
  invokeTool,
  parseToolArgs,
  TOOLS,
  toolOwnText,
  toolResultText,
  toolsFor,
} from "../../tools/registry";
import { toolCatalogSchema, toolResultSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { requesterOf } from "../auth";
import { MCP_ROUTE_DOC, mcpEndpoint } from "../mcp";
import { routeDoc } from "../route-doc";
import { sessionKeyString } from "../route-helpers";
import { TOOLS_INVOKE_TEXT } from "../route-texts";
import { phaseTimer } from "../server-timing";
import { valid } from "../validate";

/**
 * The envelope stays open (OpenClaw clients send fields of their own; docs/contract.md, "Endpoints"); what it
 * carries is exact: `args` an object when given — `null` is refused, not read as absent, so a client's bug
 * is not run as a call without arguments — and `sessionKey` a key the parser takes.
 */
export const invokeBody = z.object({
  tool: z.string().min(1).max(128),
  action: z.string().max(128).optional(),
  args: z
    .record(z.string(), z.unknown(), { error: "expected an object (omit args, or send {}, for no arguments)" })
    .optional(),
  sessionKey: sessionKeyString().optional().describe("Requester session (default: `main` of the token's agent)"),
  dryRun: z.boolean().optional(),
});

/**
 * OpenClaw-compatible tool invocation (docs/contract.md, "Endpoints"): `{ ok: true, result: { content, details } }`.
 * The text is the payload's JSON, or the tool's own text (session_status: its status card) when `tool` has one.
 */
export function toolResult(payload: unknown, tool?: string) {
  // Compact JSON: the payload travels twice (text and details), so whitespace would double its cost.
  const text = tool ? toolResultText(tool, payload) : JSON.stringify(payload);
  return { content: [{ type: "text" as const, text }], details: payload };
}

/**
 * The `/tools/invoke` answer `{ ok: true, result: toolResult(payload, tool) }` as JSON text, byte for byte
 * what `c.json` makes of it, with the payload serialised once: when the text block is the payload's JSON
 * (every tool without its own text) that one string is also `details`. `c.json` would serialise the payload
 * again — for a sessions_list page, 50 rows the text block already holds (docs/scale.md).
 */
export function toolResultBody(payload: unknown, tool: string): string {
  const json = JSON.stringify(payload);
  // A payload with no JSON (undefined) has no `details` key in c.json's text either.
  if (json === undefined) return JSON.stringify({ ok: true, result: toolResult(payload, tool) });
  const text = toolOwnText(tool, payload) ?? json;
  return `{"ok":true,"result":{"content":[{"type":"text","text":${JSON.stringify(text)}}],"details":${json}}}`;
}

/**
 * The documented body: one variant per tool, its `args` the tool's own schema (components
 * `<tool>.args`, added by src/http/openapi.ts from the same registry). The validator checks the
 * envelope; the tool's schema checks `args` when the tool is found (an unknown tool is a 404).
 */
function invokeRequestDoc() {
  const common = z.toJSONSchema(invokeBody.omit({ tool: true, args: true }), { io: "input" }).properties;
  return {
    required: true,
    content: {
      "application/json": {
        schema: {
          oneOf: TOOLS.map((t) => ({
            type: "object",
            title: t.name,
            properties: {
              tool: { const: t.name },
              args: { $ref: `#/components/schemas/${t.name}.args` },
              ...common,
            },
            // A tool with required parameters cannot be called without `args` (its schema names them).
            required: (toolArgsSchema(t).required as string[] | undefined)?.length ? ["tool", "args"] : ["tool"],
          })),
        },
      },
    },
  };
}

/**
 * The tool registry (src/tools/registry.ts) over HTTP: `/tools/invoke` (OpenClaw-compatible), `/v1/tools`
 * (the caller's tool set as JSON-Schema function definitions) and `/mcp` (the same tools over MCP).
 */
export const toolsApp = new Hono<AppEnv>()
  .post(
    "/tools/invoke",
    valid("json", invokeBody),
    // After the validator, so this hand-written body (one variant per tool) wins in the document.
    routeDoc({
      tag: "tools",
      summary: "Invoke a tool (OpenClaw-compatible)",
      description: TOOLS_INVOKE_TEXT,
      ok: { description: "Tool result: the payload as text and as `details`", schema: toolResultSchema },
      errors: [400, 403, 404, 413],
      sessionHeader: true,
      requestBody: invokeRequestDoc(),
    }),
    async (c) => {
      const body = c.req.valid("json");
      const cfg = c.get("cfg");
      startTime(c, "caller");
      const caller = await requesterOf(c, body.sessionKey ?? c.req.header("X-Session-Key"));
      endTime(c, "caller");
      const ctx = { env: c.env, cfg, caller, time: phaseTimer(c) };
      if (body.dryRun) {
        const tool = findTool(caller, cfg, body.tool);
        const args = parseToolArgs(tool, body.args);
        return c.json({
          ok: true as const,
          result: toolResult({ dryRun: true, tool: tool.name, args, sessionKey: caller.sessionKey }),
        } satisfies z.infer<typeof toolResultSchema>);
      }
      const payload = await invokeTool(ctx, body.tool, body.args);
      return c.body(toolResultBody(payload, body.tool), 200, { "Content-Type": "application/json" });
    },
  )
  // Per caller on purpose: a sub-agent's run token sees the sub-agent tool set, so a runtime never offers
  // its model a tool the gateway would refuse. The typed client turns this into OpenAI / AI SDK tools.
  .get(
    "/v1/tools",
    routeDoc({
      tag: "tools",
      summary: "Tools this caller may use, as JSON-Schema function definitions",
      ok: { description: "The caller's tool set", schema: toolCatalogSchema },
      errors: [400, 403],
      sessionHeader: true,
    }),
    async (c) => {
      const caller = await requesterOf(c, c.req.header("X-Session-Key"));
      return c.json({
        sessionKey: caller.sessionKey,
        tools: toolsFor(caller, c.get("cfg")).map((def) => describeTool(def)),
      } satisfies z.infer<typeof toolCatalogSchema>);
    },
  )
  // Stateless: no server-initiated stream (GET) and no session to end (DELETE); both get the app's 405
  // with `Allow: POST` (src/http/app.ts), which MCP clients read as "not offered".
  .post("/mcp", routeDoc(MCP_ROUTE_DOC), mcpEndpoint);

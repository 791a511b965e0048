import type { Hono } from "hono";
import { endTime, startTime } from "hono/timing";
import { z } from "zod";
import { findTool, invokeTool, parseToolArgs, TOOLS } from "../tools/registry";
import { toolResultSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { requesterOf } from "./auth";
import { routeDoc } from "./route-doc";
import { phaseTimer } from "./server-timing";
import { valid } from "./validate";

export const invokeBody = z.object({
  tool: z.string().min(1).max(128),
  action: z.string().max(128).optional(),
  args: z.unknown().optional(),
  sessionKey: z.string().max(1024).optional(),
  dryRun: z.boolean().optional(),
});

/** OpenClaw-compatible tool invocation (docs/contract.md, "Endpoints"): `{ ok: true, result: { content, details } }`. */
export function toolResult(payload: unknown) {
  // Compact JSON: the payload travels twice (text and details), so whitespace would double its cost.
  return { content: [{ type: "text" as const, text: JSON.stringify(payload) }], details: payload };
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
            required: ["tool"],
          })),
        },
      },
    },
  };
}

export function toolsInvokeRoutes(app: Hono<AppEnv>): void {
  app.post(
    "/tools/invoke",
    valid("json", invokeBody),
    routeDoc({
      tag: "tools",
      summary: "Invoke a tool (OpenClaw-compatible)",
      description:
        'Tool refusals defined by the spec (`{status: "forbidden"|"error", error}`) are 200 results. `sessionKey` (or the `X-Session-Key` header) is the requester session; `dryRun` validates and echoes the arguments without running the tool.',
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
      return c.json({ ok: true as const, result: toolResult(payload) } satisfies z.infer<typeof toolResultSchema>);
    },
  );
}

import type { Hono } from "hono";
import { z } from "zod";
import { findTool, invokeTool, parseToolArgs } from "../tools/registry";
import type { AppEnv } from "./app-env";
import { requesterOf } from "./auth";
import { jsonBody, methodNotAllowed, parseBody } from "./route-helpers";

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

export function toolsInvokeRoutes(app: Hono<AppEnv>): void {
  app.post("/tools/invoke", async (c) => {
    const body = parseBody(invokeBody, await jsonBody(c));
    const cfg = c.get("cfg");
    const caller = await requesterOf(c, body.sessionKey ?? c.req.header("X-Session-Key"));
    const ctx = { env: c.env, cfg, caller };
    if (body.dryRun) {
      const tool = findTool(caller, cfg, body.tool);
      const args = parseToolArgs(tool, body.args);
      return c.json({
        ok: true,
        result: toolResult({ dryRun: true, tool: tool.name, args, sessionKey: caller.sessionKey }),
      });
    }
    const payload = await invokeTool(ctx, body.tool, body.args);
    return c.json({ ok: true, result: toolResult(payload) });
  });
  app.all("/tools/invoke", () => methodNotAllowed("POST"));
}

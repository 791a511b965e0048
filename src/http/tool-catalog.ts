import type { Hono } from "hono";
import type { z } from "zod";
import { describeTool } from "../tools/json-schema";
import { toolsFor } from "../tools/registry";
import { toolCatalogSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { requesterOf } from "./auth";
import { routeDoc } from "./route-doc";

/**
 * `GET /v1/tools`: the tools this caller may use, as JSON-Schema function definitions derived from
 * the registry's zod schemas. Per caller on purpose: a sub-agent's run token sees the sub-agent tool
 * set, so a runtime never offers its model a tool the gateway would refuse. The typed client turns
 * this into OpenAI / AI SDK tool definitions.
 */
export function toolCatalogRoutes(app: Hono<AppEnv>): void {
  app.get(
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
  );
}

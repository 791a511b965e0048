import type { Hono } from "hono";
import type { z } from "zod";
import { configWarnings, defaultAgentId, isAgentSandboxed } from "../config/load";
import { archiveStatus } from "../spawn/archive-read";
import { agentsSchema, healthSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { authenticate } from "./auth";
import { routeDoc } from "./route-doc";

/** `GET /healthz` (public) and `GET /v1/agents`. */
export function healthRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/healthz",
    routeDoc({
      tag: "meta",
      summary: "Liveness and configured agent ids",
      description:
        "With the operator token also `warnings` (what of CONFIG was mapped, clamped or ignored) and the archive bucket's status. A token that is sent is checked (401, 429).",
      ok: { description: "Healthy", schema: healthSchema },
      errors: [401, 429, 500],
      public: true,
    }),
    async (c) => {
      const cfg = c.get("cfg");
      // Public liveness; the operator token also sees what of CONFIG was mapped or ignored (src/config/carry-over.ts).
      const operator = c.req.header("Authorization") ? (await authenticate(c, cfg)).role === "operator" : false;
      return c.json({
        ok: true as const,
        agents: cfg.agents.list.map((a) => a.id),
        ...(operator ? { warnings: configWarnings(cfg), archive: archiveStatus(c.env) } : {}),
      } satisfies z.infer<typeof healthSchema>);
    },
  );
}

export function agentsRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/agents",
    routeDoc({
      tag: "agents",
      summary: "Configured agents",
      ok: { description: "Agents", schema: agentsSchema },
    }),
    (c) => {
      const cfg = c.get("cfg");
      const def = defaultAgentId(cfg);
      return c.json({
        defaultAgentId: def,
        agents: cfg.agents.list.map((a) => ({
          id: a.id,
          ...(a.name ? { name: a.name } : {}),
          default: a.id === def,
          model: a.model ?? cfg.agents.defaults.model,
          sandboxed: isAgentSandboxed(cfg, a.id),
          runtime: a.runtime?.type ?? "model",
        })),
      } satisfies z.infer<typeof agentsSchema>);
    },
  );
}

import { Hono } from "hono";
import type { z } from "zod";
import { agentModel, agentSandboxMode, agentUnavailable, configWarnings, defaultAgentId } from "../../config/load";
import { redactSecrets } from "../../config/redact";
import { archiveStatus } from "../../spawn/archive-read";
import { agentsSchema, effectiveConfigSchema, healthSchema, openApiDocumentSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { authenticate } from "../auth";
import { DOCS_PAGE, docsHeaders } from "../docs";
import { openApiDocument } from "../openapi";
import { routeDoc } from "../route-doc";
import { HEALTHZ_TEXT } from "../route-texts";
import { assertOperator } from "../scopes";

/**
 * The gateway about itself: liveness (`/healthz`, public), its agents and effective configuration
 * (`/v1/agents`, `/v1/config`), and its API reference (`/openapi.json` and `/docs`, public: they describe
 * the API and hold no data). The document is generated from `root`, the app this one is mounted in.
 */
export function metaApp(root: Hono<AppEnv>) {
  // Built once (the routes and schemas are fixed); only the server URL is per request.
  let doc: Promise<Record<string, unknown>> | null = null;
  return (
    new Hono<AppEnv>()
      .get(
        "/healthz",
        routeDoc({
          tag: "meta",
          summary: "Liveness and configured agent ids",
          description: HEALTHZ_TEXT,
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
            agents: cfg.agents.roster.map((a) => a.id),
            ...(operator ? { warnings: configWarnings(cfg), archive: archiveStatus(c.env) } : {}),
          } satisfies z.infer<typeof healthSchema>);
        },
      )
      .get(
        "/v1/agents",
        routeDoc({ tag: "agents", summary: "Configured agents", ok: { description: "Agents", schema: agentsSchema } }),
        (c) => {
          const cfg = c.get("cfg");
          const def = defaultAgentId(cfg);
          return c.json({
            defaultAgentId: def,
            agents: cfg.agents.roster.map((a) => {
              const unavailable = agentUnavailable(cfg, a.id);
              const sandbox = agentSandboxMode(cfg, a.id);
              return {
                id: a.id,
                ...(a.name ? { name: a.name } : {}),
                default: a.id === def,
                model: agentModel(cfg, a.id),
                sandboxed: sandbox !== "off",
                sandbox,
                runtime: a.runtime.type === "unavailable" ? a.runtime.requested : a.runtime.type,
                available: !unavailable,
                ...(unavailable ? { unavailableReason: unavailable } : {}),
              };
            }),
          } satisfies z.infer<typeof agentsSchema>);
        },
      )
      // What the operator console (/console) reads beyond the other /v1 routes.
      .get(
        "/v1/config",
        routeDoc({
          tag: "meta",
          summary: "The effective configuration, secrets redacted (operator token only)",
          ok: { description: "Configuration and its warnings", schema: effectiveConfigSchema },
          errors: [403],
        }),
        (c) => {
          assertOperator(c.get("principal"), "Reading the configuration");
          const cfg = c.get("cfg");
          // The roster and default are derived from `agents.entries`: shown once, as configured.
          const { roster: _roster, defaultId: _defaultId, ...agents } = cfg.agents;
          return c.json({
            config: redactSecrets({ ...cfg, agents }) as Record<string, unknown>,
            warnings: configWarnings(cfg),
          } satisfies z.infer<typeof effectiveConfigSchema>);
        },
      )
      .get(
        "/openapi.json",
        routeDoc({
          tag: "meta",
          summary: "This document",
          ok: { description: "OpenAPI 3.1 document", schema: openApiDocumentSchema },
          public: true,
          errors: [500],
        }),
        async (c) => {
          // A failed build is not kept: the next request tries again.
          doc ??= openApiDocument(root).catch((err) => {
            doc = null;
            throw err;
          });
          return c.json({ ...(await doc), servers: [{ url: new URL(c.req.url).origin }] });
        },
      )
      .get(
        "/docs",
        routeDoc({
          tag: "meta",
          summary: "Human-readable API reference (Scalar, served by this Worker)",
          ok: { description: "HTML page", contentType: "text/html" },
          public: true,
          errors: [500],
        }),
        async (c) => c.html(DOCS_PAGE, 200, await docsHeaders()),
      )
  );
}

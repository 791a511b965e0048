import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { endTime, startTime, timing } from "hono/timing";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { assertSecrets } from "../config/secrets";
import { SwitchboardError } from "../errors";
import { log } from "../log";
import type { AppEnv } from "./app-env";
import { authenticate } from "./auth";
import { mcpOriginGuard } from "./mcp-guard";
import { requestLog } from "./request-log";
import { a2aApp } from "./routes/a2a";
import { a2aRestApp } from "./routes/a2a-rest";
import { discoveryApp } from "./routes/discovery";
import { eventsApp } from "./routes/events";
import { metaApp } from "./routes/meta";
import { runsApp } from "./routes/runs";
import { sessionsApp } from "./routes/sessions";
import { tasksApp } from "./routes/tasks";
import { toolsApp } from "./routes/tools";
import { runTokenWriteScope } from "./scopes";
import { strictQuery } from "./strict-query";
import { fromHttpException } from "./validate";

export const MAX_BODY_BYTES = 2 * 1024 * 1024;

/**
 * Tool calls (`/tools/invoke`, `/mcp`) may carry sessions_spawn attachments: with attachments enabled
 * their limit grows so the configured `maxTotalBytes` fits once base64-encoded (4 bytes per 3) next to
 * the rest of a 2 MB call. Everything else keeps the 2 MB limit (docs/limits.md).
 */
export function bodyLimitFor(cfg: Config, path: string): number {
  const a = cfg.tools.sessions_spawn.attachments;
  if (!a.enabled || !(path === "/tools/invoke" || path === "/mcp")) return MAX_BODY_BYTES;
  return MAX_BODY_BYTES + Math.ceil(a.maxTotalBytes / 3) * 4;
}

/**
 * The Worker's HTTP surface: one error envelope, config validated before anything else, then one Hono
 * sub-app per resource mounted with `app.route()` (src/http/routes/; AGENTS.md, "Add a route").
 * `extra`: more routes after the production ones (the bench Worker's, bench/routes.ts).
 */
export function createApp(extra?: Hono<AppEnv>): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.onError((err, c) => {
    const known = err instanceof SwitchboardError ? err : fromHttpException(err);
    const e = known ?? new SwitchboardError("internal_error", "Internal error");
    if (!known)
      log.error("unhandled_error", {
        requestId: c.get("requestId"),
        method: c.req.method,
        path: new URL(c.req.url).pathname,
        error: err,
      });
    for (const [k, v] of Object.entries(e.headers)) c.header(k, v);
    return c.json(e.toEnvelope(), e.status);
  });
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    return c.json(new SwitchboardError("not_found", `No route for ${c.req.method} ${path}`).toEnvelope(), 404);
  });
  app.use("*", requestLog);
  // Server-Timing on every answer: total, auth and, for tools, the phases that call objects (docs/scale.md).
  app.use("*", timing({ totalDescription: "total" }));
  // A known path with the wrong method is a 405 with an `Allow` header (docs/contract.md, "Endpoints"), not a 404.
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) =>
        c.json(
          new SwitchboardError(
            "method_not_allowed",
            `Method ${c.req.method} not allowed on ${new URL(c.req.url).pathname}; use ${methods.join(", ")}`,
          ).toEnvelope(),
          405,
          { Allow: methods.join(", ") },
        ),
    }),
  );

  // An invalid CONFIG, or a refused secret (src/config/secrets.ts), answers every request with a 500
  // naming it (never a crash loop).
  app.use("*", async (c, next) => {
    c.set("cfg", loadConfig(c.env));
    assertSecrets(c.env);
    await next();
  });

  app.use("*", (c, next) => {
    const maxSize = bodyLimitFor(c.get("cfg"), new URL(c.req.url).pathname);
    return bodyLimit({
      maxSize,
      onError: () => {
        throw new SwitchboardError("payload_too_large", `Request body exceeds ${maxSize} bytes`);
      },
    })(c, next);
  });

  // Everything under these prefixes needs a bearer token; /healthz, /openapi.json and /docs are public.
  const authed = async (c: Context<AppEnv>, next: () => Promise<void>) => {
    startTime(c, "auth");
    c.set("principal", await authenticate(c, c.get("cfg")));
    endTime(c, "auth");
    await next();
  };
  app.use("/tools/*", authed);
  app.use("/v1/*", authed);
  app.use("/v1/*", runTokenWriteScope);
  // The origin rule comes first: a foreign Origin or Host is a 403 whatever the token (src/http/mcp-guard.ts).
  app.use("/mcp", mcpOriginGuard);
  app.use("/mcp", authed);
  // After auth (a caller without a token learns nothing of a route's parameters), before every route's validators.
  app.use("*", strictQuery);

  app
    .route("/", toolsApp) // /tools/invoke, /v1/tools, /mcp
    .route("/v1/sessions", sessionsApp)
    .route("/v1/runs", runsApp)
    .route("/v1", eventsApp) // /v1/sessions/{key}/events, /v1/runs/{id}/events
    .route("/", a2aApp) // /a2a/{agentId} (JSON-RPC), its agent card, /.well-known/agent-card.json
    .route("/", a2aRestApp) // /a2a/{agentId}/message:send, /tasks/{id}, … (A2A's HTTP+JSON binding)
    .route("/", discoveryApp) // /.well-known/mcp/server-card.json, /mcp/server-card, /.well-known/mcp/catalog.json
    .route("/v1", tasksApp) // /v1/sessions/{key}/tasks[/audit], /v1/tasks/{taskId}
    .route("/", metaApp(app)); // /healthz, /v1/agents, /v1/config, /openapi.json (from every route above), /docs
  if (extra) app.route("/", extra);
  return app;
}

import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { configWarnings, loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { SwitchboardError } from "../errors";
import { log } from "../log";
import { archiveStatus } from "../spawn/archive-read";
import type { AppEnv } from "./app-env";
import { authenticate } from "./auth";
import { docsRoutes } from "./docs";
import { mcpRoutes } from "./mcp";
import { openApiRoutes } from "./openapi";
import { requestLog } from "./request-log";
import { attachmentsRoutes } from "./routes-attachments";
import { deadTimersRoutes } from "./routes-dead-timers";
import { deliveriesRoutes } from "./routes-deliveries";
import { v1Routes } from "./routes-v1";
import { runCompleteRoutes } from "./run-complete";
import { runTokenWriteScope } from "./scopes";
import { toolCatalogRoutes } from "./tool-catalog";
import { toolsInvokeRoutes } from "./tools-invoke";

export const MAX_BODY_BYTES = 2 * 1024 * 1024;

/**
 * Tool calls (`/tools/invoke`, `/mcp`) may carry sessions_spawn attachments: with attachments enabled
 * their limit grows so the configured `maxTotalBytes` fits once base64-encoded (4 bytes per 3) next to
 * the rest of a 2 MB call. Everything else keeps the 2 MB limit (README "Limits").
 */
export function bodyLimitFor(cfg: Config, path: string): number {
  const a = cfg.tools.sessions_spawn.attachments;
  if (!a.enabled || !(path === "/tools/invoke" || path === "/mcp")) return MAX_BODY_BYTES;
  return MAX_BODY_BYTES + Math.ceil(a.maxTotalBytes / 3) * 4;
}

/** The Worker's HTTP surface: one error envelope, config validated before anything else. */
export function createApp(extra?: (app: Hono<AppEnv>) => void): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.onError((err, c) => {
    const e = err instanceof SwitchboardError ? err : new SwitchboardError("internal_error", "Internal error");
    if (!(err instanceof SwitchboardError))
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
    // A known path with the wrong method is a 405 naming the methods it takes (docs/contract.md, "Endpoints"), not a 404.
    const allowed = methodsFor(app, path);
    if (allowed.length > 0) {
      c.header("Allow", allowed.join(", "));
      return c.json(
        new SwitchboardError(
          "method_not_allowed",
          `Method ${c.req.method} not allowed on ${path}; use ${allowed.join(", ")}`,
        ).toEnvelope(),
        405,
      );
    }
    return c.json(new SwitchboardError("not_found", `No route for ${c.req.method} ${path}`).toEnvelope(), 404);
  });

  app.use("*", requestLog);

  // An invalid CONFIG answers every request with a 500 naming the bad path (never a crash loop).
  app.use("*", async (c, next) => {
    c.set("cfg", loadConfig(c.env));
    await next();
  });

  app.get("/healthz", async (c) => {
    const cfg = c.get("cfg");
    // Public liveness; the operator token also sees what of CONFIG was mapped or ignored (src/config/carry-over.ts).
    const operator = c.req.header("Authorization") ? (await authenticate(c, cfg)).role === "operator" : false;
    return c.json({
      ok: true,
      agents: cfg.agents.list.map((a) => a.id),
      ...(operator ? { warnings: configWarnings(cfg), archive: archiveStatus(c.env) } : {}),
    });
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

  /** Everything below needs a bearer token. */
  const authed = async (c: import("hono").Context<AppEnv>, next: () => Promise<void>) => {
    c.set("principal", await authenticate(c, c.get("cfg")));
    await next();
  };
  app.use("/tools/*", authed);
  app.use("/v1/*", authed);
  app.use("/v1/*", runTokenWriteScope);
  app.use("/mcp", authed);

  toolsInvokeRoutes(app);
  v1Routes(app);
  deliveriesRoutes(app);
  deadTimersRoutes(app);
  attachmentsRoutes(app);
  mcpRoutes(app);
  runCompleteRoutes(app);
  toolCatalogRoutes(app);
  openApiRoutes(app); // public: reads app.routes at request time, so every route above is listed
  docsRoutes(app); // public
  extra?.(app);
  return app;
}

/** Methods of the routes (not middleware) whose pattern matches `path`, in registration order. */
function methodsFor(app: Hono<AppEnv>, path: string): string[] {
  const out: string[] = [];
  for (const r of app.routes) {
    if (r.method === "ALL" || out.includes(r.method)) continue;
    const pattern = r.path
      .split("/")
      .map((seg) => (seg.startsWith(":") ? "[^/]+" : seg === "*" ? ".*" : seg.replace(/[.+?^${}()|[\]\\]/g, "\\$&")))
      .join("/");
    if (new RegExp(`^${pattern}/?$`).test(path)) out.push(r.method);
  }
  return out;
}

import type { Hono } from "hono";
import type { z } from "zod";
import { runCompletionSchema } from "../runners/webhook-runner";
import { MAX_WAIT_MS } from "../session/session-object";
import { type JsonSchema, jsonSchemaOf } from "../tools/json-schema";
import { TOOLS } from "../tools/registry";
import type { AppEnv } from "./app-env";
import { inboundMessage, sessionPatch } from "./routes-v1";
import { invokeBody } from "./tools-invoke";

/**
 * `GET /openapi.json` (OpenAPI 3.1). The path list is read from the app's own routes at request time,
 * so a route cannot exist undocumented without showing up (the test fails on "undocumented"); request
 * bodies and tool arguments are derived from the same zod schemas that validate them.
 */

type ParamDoc = { name: string; in: "query" | "header"; description: string; schema: JsonSchema; required?: boolean };
interface OperationDoc {
  summary: string;
  description?: string;
  tag: string;
  query?: ParamDoc[];
  /** Header X-Session-Key selects the requester session. */
  sessionHeader?: boolean;
  /** A zod schema, a JSON Schema, or a function building one at request time (the tool registry grows at import). */
  body?: z.ZodType | JsonSchema | (() => JsonSchema);
  /** Status → [description, schema ref or schema, content type]. */
  responses: Record<string, [string, JsonSchema?, string?]>;
  public?: boolean;
}

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const int = (min: number, max?: number): JsonSchema => ({
  type: "integer",
  minimum: min,
  ...(max !== undefined ? { maximum: max } : {}),
});
const q = (name: string, description: string, schema: JsonSchema): ParamDoc => ({
  name,
  in: "query",
  description,
  schema,
});

const SESSION_HEADER: ParamDoc = {
  name: "X-Session-Key",
  in: "header",
  description: "Requester session (default: `main` of the token's agent). A run token may only name its own session.",
  schema: { type: "string" },
};

/** Documentation of every public route, keyed `METHOD path` in Hono's path syntax. */
const ROUTES: Record<string, OperationDoc> = {
  "GET /healthz": {
    tag: "meta",
    summary:
      "Liveness and configured agent ids; with the operator token also `warnings`: what of CONFIG was mapped, clamped or ignored",
    public: true,
    responses: {
      200: [
        "Healthy",
        {
          type: "object",
          properties: {
            ok: { const: true },
            agents: { type: "array", items: { type: "string" } },
            warnings: { type: "array", items: { type: "string" } },
          },
        },
      ],
    },
  },
  "GET /openapi.json": {
    tag: "meta",
    summary: "This document",
    public: true,
    responses: { 200: ["OpenAPI 3.1 document", { type: "object" }] },
  },
  "GET /docs": {
    tag: "meta",
    summary: "Human-readable API reference (self-contained HTML)",
    public: true,
    responses: { 200: ["HTML page", { type: "string" }, "text/html"] },
  },
  "POST /tools/invoke": {
    tag: "tools",
    summary: "Invoke a tool (OpenClaw-compatible)",
    description:
      'Body `{tool, args, sessionKey?, dryRun?}`. Tool refusals defined by the spec (`{status: "forbidden"|"error", error}`) are 200 results. The arguments of each tool are in `components.schemas.<tool>.args`.',
    body: () => ({ oneOf: toolVariants() }),
    responses: {
      200: ["Tool result: payload as text and as `details`", ref("ToolResult")],
      404: ["Unknown tool, or not available for this session", ref("Error")],
    },
  },
  "GET /v1/tools": {
    tag: "tools",
    summary: "Tools this caller may use, as JSON-Schema function definitions",
    sessionHeader: true,
    responses: { 200: ["The caller's tool set", ref("ToolCatalog")] },
  },
  "POST /mcp": {
    tag: "tools",
    summary: "MCP endpoint (stateless Streamable HTTP, JSON responses)",
    description:
      "JSON-RPC 2.0: initialize, ping, tools/list, tools/call. Same tools, schemas and handlers as /tools/invoke.",
    sessionHeader: true,
    body: { type: "object", description: "A JSON-RPC 2.0 message or batch" },
    responses: { 200: ["JSON-RPC response", { type: "object" }], 202: ["Notification accepted"] },
  },
  "POST /v1/sessions/:key/messages": {
    tag: "sessions",
    summary: "Inbound message from a channel: queues a run",
    description:
      "Creates the session on first use and records the delivery route. With `deliver: true` the reply goes out through the channel (send policy applies). A `message` over `limits.maxMessageBytes` (512 KiB of UTF-8 by default, see docs/limits.md) is a 413 naming the field; nothing is stored.",
    body: inboundMessage,
    responses: { 202: ["Run queued", ref("Accepted")] },
  },
  "GET /v1/sessions": {
    tag: "sessions",
    summary: "List sessions of one agent (newest first, cursor-paged)",
    query: [
      q("agentId", "Agent whose sessions to list (default: the token's agent, or the default agent)", {
        type: "string",
      }),
      q("limit", "Rows per page (default 50)", int(1, 1000)),
      q("kinds", "Comma-separated kinds: main, group, cron, hook, node, other", { type: "string" }),
      q("activeMinutes", "Only sessions updated within N minutes", int(1)),
      q("cursor", "nextCursor of the previous page", { type: "string" }),
    ],
    responses: {
      200: [
        "A page of sessions",
        {
          type: "object",
          properties: {
            count: { type: "integer" },
            sessions: { type: "array", items: ref("Session") },
            nextCursor: { type: ["string", "null"] },
          },
        },
      ],
    },
  },
  "GET /v1/sessions/:key": {
    tag: "sessions",
    summary: "One session's row",
    responses: { 200: ["The session", ref("Session")] },
  },
  "PATCH /v1/sessions/:key": {
    tag: "sessions",
    summary: "Change label, model, thinking/verbose level or send policy",
    body: sessionPatch,
    responses: { 200: ["The updated session", ref("Session")] },
  },
  "DELETE /v1/sessions/:key": {
    tag: "sessions",
    summary: "Delete a session (never `main`)",
    responses: {
      200: ["Deleted", { type: "object", properties: { ok: { const: true }, deleted: { type: "string" } } }],
    },
  },
  "GET /v1/sessions/:key/history": {
    tag: "sessions",
    summary: "A sanitized page of the transcript (same shape as sessions_history)",
    query: [
      q("limit", "Messages (default 50)", int(1, 1000)),
      q("before", "Only messages older than this seq (nextBefore)", int(1)),
      q("includeTools", "Include toolResult messages", { type: "boolean" }),
    ],
    responses: { 200: ["History page", { type: "object" }] },
  },
  "GET /v1/sessions/:key/transcript.jsonl": {
    tag: "sessions",
    summary: "The whole transcript as JSON lines (streamed)",
    responses: {
      200: ["One session header line, then one line per message", { type: "string" }, "application/x-ndjson"],
    },
  },
  "GET /v1/sessions/:key/deliveries": {
    tag: "deliveries",
    summary: "Outbound deliveries of a session (outbox), including dead letters",
    query: [
      q("status", "Only this status", { enum: ["pending", "delivered", "blocked", "dead"] }),
      q("limit", "Rows (default 100)", int(1, 500)),
    ],
    responses: {
      200: [
        "Deliveries",
        {
          type: "object",
          properties: {
            sessionKey: { type: "string" },
            count: { type: "integer" },
            deliveries: { type: "array", items: { type: "object" } },
            truncated: {
              const: true,
              description:
                "Present when the listing reached its byte budget (2 MiB, docs/limits.md) before `limit` rows",
            },
          },
        },
      ],
    },
  },
  "POST /v1/sessions/:key/deliveries/:id/retry": {
    tag: "deliveries",
    summary: "Re-queue a dead or blocked delivery",
    responses: { 200: ["The delivery", { type: "object" }] },
  },
  "GET /v1/sessions/:key/timers/dead": {
    tag: "deliveries",
    summary:
      "Timers that gave up after their attempts (kind, ref, attempts, lastError, firstFailedAt, diedAt, retryable), newest first",
    query: [q("limit", "Rows (default 100)", int(1, 100))],
    responses: {
      200: [
        "Dead timers",
        {
          type: "object",
          properties: {
            sessionKey: { type: "string" },
            count: { type: "integer" },
            timers: { type: "array", items: { type: "object" } },
          },
        },
      ],
    },
  },
  "POST /v1/sessions/:key/timers/dead/:kind/:ref/retry": {
    tag: "deliveries",
    summary: "Re-queue a dead timer with a fresh attempt budget (409 when its death ended a flow)",
    responses: { 200: ["The timer, retried", { type: "object" }] },
  },
  "GET /v1/sessions/:key/attachments": {
    tag: "sessions",
    summary: "Files attached to a sub-agent by sessions_spawn (name, mimeType, bytes, sha256)",
    responses: {
      200: [
        "Attachments",
        {
          type: "object",
          properties: {
            sessionKey: { type: "string" },
            count: { type: "integer" },
            attachments: { type: "array", items: { type: "object" } },
          },
        },
      ],
    },
  },
  "GET /v1/sessions/:key/attachments/:name": {
    tag: "sessions",
    summary: "One attachment's bytes (readable by the sub-agent's runs)",
    responses: { 200: ["The file", { type: "string" }, "application/octet-stream"] },
  },
  "GET /v1/runs/:id": {
    tag: "runs",
    summary: "A run's status and outcome",
    responses: { 200: ["The run", ref("Run")] },
  },
  "GET /v1/runs/:id/wait": {
    tag: "runs",
    summary: "Wait server-side for a run to end",
    description:
      "Returns when the run ends or after timeoutMs with the run as it is (non-final status). Re-callable after a reconnect.",
    query: [q("timeoutMs", "Longest wait (default 30000)", int(0, MAX_WAIT_MS))],
    responses: { 200: ["The run", ref("Run")] },
  },
  "POST /v1/runs/:id/abort": {
    tag: "runs",
    summary: "Abort a queued or running run",
    responses: { 200: ["The run", ref("Run")] },
  },
  "POST /v1/runs/:id/complete": {
    tag: "runs",
    summary: "Complete a webhook run (run token only)",
    description:
      "A webhook runtime that answered 202 sends the run's `{reply}` or `{error}` here with the run token it received. The token stops working when the run ends.",
    body: runCompletionSchema,
    responses: {
      200: ["The ended run", ref("Run")],
      403: ["Not this run's token", ref("Error")],
      409: ["The run already ended another way", ref("Error")],
    },
  },
  "GET /v1/agents": { tag: "agents", summary: "Configured agents", responses: { 200: ["Agents", { type: "object" }] } },
};

/** Routes that exist for protocol reasons only (405 answers of the stateless MCP endpoint). */
const HIDDEN = [/^GET \/mcp$/, /^DELETE \/mcp$/];

function toolVariants(): JsonSchema[] {
  return TOOLS.map((t) => ({
    type: "object",
    title: t.name,
    properties: {
      tool: { const: t.name },
      args: ref(`${t.name}.args`),
      sessionKey: { type: "string", description: "Requester session (default: `main` of the token's agent)" },
      dryRun: { type: "boolean", description: "Validate and echo the arguments without running the tool" },
    },
    required: ["tool"],
  }));
}

function components(): Record<string, JsonSchema> {
  const schemas: Record<string, JsonSchema> = {
    Error: {
      type: "object",
      description: "The one error envelope of every endpoint.",
      properties: {
        ok: { const: false },
        error: {
          type: "object",
          properties: { type: { type: "string" }, message: { type: "string" } },
          required: ["type", "message"],
        },
      },
      required: ["ok", "error"],
    },
    ToolInvokeRequest: jsonSchemaOf(invokeBody),
    ToolResult: {
      type: "object",
      properties: {
        ok: { const: true },
        result: {
          type: "object",
          properties: {
            content: {
              type: "array",
              items: { type: "object", properties: { type: { const: "text" }, text: { type: "string" } } },
            },
            details: { description: "The tool's payload" },
          },
        },
      },
    },
    ToolCatalog: {
      type: "object",
      properties: {
        sessionKey: { type: "string" },
        tools: {
          type: "array",
          items: {
            type: "object",
            properties: { name: { type: "string" }, description: { type: "string" }, parameters: { type: "object" } },
            required: ["name", "description", "parameters"],
          },
        },
      },
    },
    Accepted: {
      type: "object",
      properties: { runId: { type: "string" }, status: { const: "accepted" }, sessionKey: { type: "string" } },
      required: ["runId", "status"],
    },
    Run: {
      type: "object",
      properties: {
        runId: { type: "string" },
        sessionKey: { type: "string" },
        status: { enum: ["queued", "running", "ok", "error", "timeout", "aborted"] },
        kind: { type: "string" },
        reply: { type: "string" },
        error: { type: "string" },
        createdAt: { type: "integer" },
        startedAt: { type: "integer" },
        endedAt: { type: "integer" },
        usage: {
          type: "object",
          properties: { input: { type: "integer" }, output: { type: "integer" }, totalTokens: { type: "integer" } },
        },
        model: { type: "string" },
      },
      required: ["runId", "sessionKey", "status", "createdAt"],
    },
    Session: {
      type: "object",
      description:
        "A session row, as listed by sessions_list (canonical key, kind, channel, label, updatedAt, tokens, …).",
      properties: { key: { type: "string" }, kind: { type: "string" }, sessionId: { type: "string" } },
    },
  };
  for (const t of TOOLS) schemas[`${t.name}.args`] = { description: t.description, ...jsonSchemaOf(t.schema) };
  return schemas;
}

function operationId(method: string, path: string): string {
  const words = path
    .split("/")
    .filter(Boolean)
    .map((seg) => (seg.startsWith(":") ? `by_${seg.slice(1)}` : seg.replace(/[^a-zA-Z0-9]+/g, "_")));
  return [method.toLowerCase(), ...words].join("_");
}

/** Build the document from the routes the app really serves. */
export function openApiDocument(routes: readonly { method: string; path: string }[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const seen = new Set<string>();
  for (const r of routes) {
    if (!["GET", "POST", "PATCH", "PUT", "DELETE"].includes(r.method)) continue; // middleware and 405 catch-alls
    const key = `${r.method} ${r.path}`;
    if (seen.has(key) || HIDDEN.some((re) => re.test(key))) continue;
    seen.add(key);
    const doc: OperationDoc = ROUTES[key] ?? { tag: "other", summary: "(undocumented)", responses: { 200: ["OK"] } };
    const oaPath = r.path.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
    const pathParams = [...r.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      description:
        m[1] === "key"
          ? "Session key (`agent:<id>:<rest>`, `main` or `current`), URL-encoded"
          : m[1] === "id" && r.path.startsWith("/v1/runs")
            ? "Run id"
            : m[1],
      schema: { type: "string" },
    }));
    const parameters = [...pathParams, ...(doc.query ?? []), ...(doc.sessionHeader ? [SESSION_HEADER] : [])];
    const responses: Record<string, unknown> = {};
    for (const [status, [description, schema, type]] of Object.entries(doc.responses)) {
      responses[status] = { description, ...(schema ? { content: { [type ?? "application/json"]: { schema } } } : {}) };
    }
    if (!doc.public) {
      responses["400"] ??= {
        description: "Invalid input (the message names the field)",
        content: { "application/json": { schema: ref("Error") } },
      };
      responses["401"] ??= {
        description: "Missing or invalid bearer token",
        content: { "application/json": { schema: ref("Error") } },
      };
      responses["403"] ??= {
        description: "The token may not act on this session",
        content: { "application/json": { schema: ref("Error") } },
      };
    }
    const body =
      doc.body === undefined
        ? undefined
        : typeof doc.body === "function"
          ? doc.body()
          : isZod(doc.body)
            ? jsonSchemaOf(doc.body)
            : doc.body;
    paths[oaPath] ??= {};
    paths[oaPath][r.method.toLowerCase()] = {
      operationId: operationId(r.method, r.path),
      summary: doc.summary,
      ...(doc.description ? { description: doc.description } : {}),
      tags: [doc.tag],
      ...(parameters.length ? { parameters } : {}),
      ...(body ? { requestBody: { required: true, content: { "application/json": { schema: body } } } } : {}),
      responses,
      ...(doc.public ? { security: [] } : {}),
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Switchboard",
      version: "0.1.0",
      description:
        "The session layer for AI agents: session tools over /tools/invoke, /mcp and REST. Errors use one envelope `{ok: false, error: {type, message}}`.",
    },
    security: [{ bearerAuth: [] }],
    tags: ["tools", "sessions", "runs", "deliveries", "agents", "meta"].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description: "GATEWAY_TOKEN, an AGENT_TOKENS token, or a webhook run token",
        },
      },
      schemas: components(),
    },
  };
}

function isZod(v: unknown): v is z.ZodType {
  return typeof v === "object" && v !== null && "safeParse" in v;
}

/** Public: the document describes the API and holds no data, and tooling fetches it without secrets. */
export function openApiRoutes(app: Hono<AppEnv>): void {
  // Built once (the routes and schemas are fixed); only the server URL is per request.
  let doc: Record<string, unknown> | null = null;
  app.get("/openapi.json", (c) => {
    doc ??= openApiDocument(app.routes);
    return c.json({ openapi: doc.openapi, info: doc.info, servers: [{ url: new URL(c.req.url).origin }], ...doc });
  });
}

import { describeRoute, resolver } from "hono-openapi";
import type { z } from "zod";
import { errorEnvelopeSchema } from "./api-schemas";
import { markDocumented } from "./strict-query";

/**
 * How a route describes itself in /openapi.json (docs/contract.md, "Describing a route"): put
 * `routeDoc({...})` first in the route's handlers, then `valid(...)` (src/http/validate.ts) for its
 * params, query and body: the validators put the request into the document. A route without `routeDoc`
 * is missing from the document, which test/http/openapi.test.ts fails on. (Named apart from vitest's `describe`.)
 */

export type Tag = "tools" | "sessions" | "runs" | "deliveries" | "agents" | "meta";

const ERRORS = {
  400: "Invalid input; the message names the field",
  401: "Missing or invalid bearer token",
  403: "The token may not do this (another agent's session, a scope it lacks)",
  404: "Not found",
  405: "Wrong method for this path (the `Allow` header lists the right ones)",
  409: "Conflicts with the current state",
  413: "Body or a field over its documented limit (docs/limits.md)",
  429: "Too many failed authentications from this client (docs/limits.md)",
  500: "CONFIG is invalid (the message names the path) or an internal error",
} as const;
export type ErrorStatus = keyof typeof ERRORS;

/** Every route that needs a token can answer these. */
const AUTHED: ErrorStatus[] = [401, 429, 500];

export interface RouteDoc {
  summary: string;
  description?: string;
  tag: Tag;
  /** The success answer: its status, description and JSON body schema, or the media type of a non-JSON body. */
  ok: { status?: 200 | 201 | 202 | 204; description: string; schema?: z.ZodType; contentType?: string | string[] };
  /** Error statuses this route can answer besides those of every authed route (401, 429, 500). */
  errors?: ErrorStatus[];
  /** No token needed. */
  public?: boolean;
  /** Reads the requester session from `X-Session-Key`. */
  sessionHeader?: boolean;
  /** Answers outside the envelope convention (the JSON-RPC errors of /mcp): status → description and body. */
  otherResponses?: Record<number, { description: string; schema?: z.ZodType }>;
  /**
   * A request body documented by hand, for bodies no `valid("json", …)` describes: /tools/invoke (one
   * variant per tool; place `describe` after the validator so this wins) and /mcp (JSON-RPC).
   */
  requestBody?: Record<string, unknown>;
}

const errorContent = { "application/json": { schema: resolver(errorEnvelopeSchema) } };

export const SESSION_HEADER = {
  name: "X-Session-Key",
  in: "header" as const,
  required: false,
  description: "Requester session (default: `main` of the token's agent). A run token may only name its own session.",
  schema: { type: "string" as const },
};

export function routeDoc(doc: RouteDoc) {
  const statuses = new Set<ErrorStatus>([...(doc.public ? [] : AUTHED), ...(doc.errors ?? [])]);
  const responses: Record<string, unknown> = {
    [doc.ok.status ?? 200]: {
      description: doc.ok.description,
      ...(doc.ok.contentType
        ? {
            // One answer may come as either media type (an A2A route that answers a task or, to subscribe, a stream).
            content: Object.fromEntries(
              [doc.ok.contentType].flat().map((type) => [type, { schema: { type: "string" } }]),
            ),
          }
        : doc.ok.schema
          ? { content: { "application/json": { schema: resolver(doc.ok.schema) } } }
          : {}),
    },
  };
  for (const s of [...statuses].sort()) responses[s] = { description: ERRORS[s], content: errorContent };
  for (const [s, r] of Object.entries(doc.otherResponses ?? {}))
    responses[s] = {
      description: r.description,
      ...(r.schema ? { content: { "application/json": { schema: resolver(r.schema) } } } : {}),
    };
  const described = describeRoute({
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    ...(doc.public ? { security: [] } : {}),
    ...(doc.sessionHeader ? { parameters: [SESSION_HEADER] } : {}),
    ...(doc.requestBody ? { requestBody: doc.requestBody as never } : {}),
    responses: responses as never,
  });
  // Held to closed query strings (src/http/strict-query.ts) unless its 400 is its protocol's own (/mcp: JSON-RPC),
  // whose URL is whatever a client was configured with.
  return doc.otherResponses?.[400] ? described : markDocumented(described);
}

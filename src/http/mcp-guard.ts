import { SUPPORTED_PROTOCOL_VERSIONS, validateHostHeader, validateOriginHeader } from "@modelcontextprotocol/server";
import type { Context, Next } from "hono";
import type { Config } from "../config/schema";
import type { AppEnv } from "./app-env";

/**
 * The rules `/mcp` applies before the SDK sees a request (docs/protocols.md, "MCP"): which hosts and
 * origins may call it, which protocol revisions it serves, and where JSON-RPC batches are refused.
 */

/**
 * The current revision, served by the SDK's per-request ("modern") path; the 2025-era revisions are
 * served by its stateless Streamable HTTP transport (src/http/mcp.ts).
 */
export const MCP_CURRENT_REVISION = "2026-07-28";
/** Every revision `/mcp` serves, newest first: the `MCP-Protocol-Version` values it accepts. */
export const MCP_PROTOCOL_VERSIONS: readonly string[] = [MCP_CURRENT_REVISION, ...SUPPORTED_PROTOCOL_VERSIONS];
/** The first revision without JSON-RPC batching: batches sent under it or a later one are refused. */
const NO_BATCHES_FROM = "2025-06-18";
/** Messages in one JSON-RPC batch at most (docs/limits.md): each may be a tool call, answered one after another. */
export const MCP_MAX_BATCH = 20;

/** A JSON-RPC error body as `/mcp` answers a refusal before dispatch (id null: no message was read). */
export function rpcRefusal(code: number, message: string) {
  return { jsonrpc: "2.0" as const, id: null, error: { code, message } };
}
export const INVALID_REQUEST = -32600;
export const PARSE_ERROR = -32700;
/** The Streamable HTTP transport's code for a refusal at the HTTP layer (bad header, forbidden origin). */
const TRANSPORT_ERROR = -32000;

/** Loopback host names: a browser page on the user's own machine (MCP Inspector, a local app). */
const LOOPBACK = ["localhost", "127.0.0.1", "[::1]"];

/**
 * Why this request may not reach `/mcp` from where it comes, or null. The transport spec requires a
 * server to refuse an `Origin` it does not trust with 403 (DNS rebinding, cross-site requests):
 *   - `Origin`: absent passes (non-browser clients send none; browsers send one on every POST). Present,
 *     its host name must be a loopback name, one of `mcp.allowedOrigins` or one of `mcp.allowedHosts`.
 *     The request's own `Host` does not vouch for it: under DNS rebinding the attacker's page and its
 *     requests share the attacker's host name, so "same origin" is exactly what the attack looks like.
 *     An unparseable or `null` origin is refused.
 *   - `Host`: with `mcp.allowedHosts` set, the request's host name must be one of them (port-agnostic).
 *     Unset, every host is accepted — on Cloudflare the Worker's routes and custom domains decide which
 *     host names reach it.
 * Both checks are the SDK's own (`validateHostHeader`, `validateOriginHeader`).
 */
export function originRefusal(req: Request, cfg: Config): string | null {
  const url = new URL(req.url);
  const hosts = cfg.mcp.allowedHosts.map(lower);
  if (hosts.length > 0 && !validateHostHeader(url.host, hosts).ok)
    return `Forbidden: host ${url.hostname} is not allowed`;
  const trusted = [...LOOPBACK, ...cfg.mcp.allowedOrigins.map(lower), ...hosts];
  return validateOriginHeader(req.headers.get("Origin"), trusted).ok
    ? null
    : `Forbidden: origin ${req.headers.get("Origin")} is not allowed`;
}
const lower = (s: string) => s.toLowerCase();

/** Middleware on `/mcp`, before authentication: a refused host or origin is a 403 whatever the token. */
export async function mcpOriginGuard(c: Context<AppEnv>, next: Next) {
  const refused = originRefusal(c.req.raw, c.get("cfg"));
  if (refused) return c.json(rpcRefusal(TRANSPORT_ERROR, refused), 403);
  await next();
}

/**
 * Why this POST's `MCP-Protocol-Version` and body shape are refused (400), or null. An unknown revision is
 * refused whatever the message (the transport spec's "invalid or unsupported" → 400). A batch is refused
 * when its revision removed batching (2025-06-18 and later); without the header a client speaks 2025-03-26
 * (the transport spec's assumption), which still has batches, up to MCP_MAX_BATCH messages.
 */
export function shapeRefusal(version: string | undefined, body: unknown): { code: number; message: string } | null {
  if (version !== undefined && !MCP_PROTOCOL_VERSIONS.includes(version))
    return {
      code: TRANSPORT_ERROR,
      message: `Bad Request: Unsupported protocol version: ${version} (supported versions: ${MCP_PROTOCOL_VERSIONS.join(", ")})`,
    };
  if (!Array.isArray(body)) return null;
  // Revisions are dates (YYYY-MM-DD): their order is the strings' order.
  if (version !== undefined && version >= NO_BATCHES_FROM)
    return {
      code: INVALID_REQUEST,
      message: `JSON-RPC batches are not supported under protocol ${version} (removed in ${NO_BATCHES_FROM})`,
    };
  if (body.length === 0) return { code: INVALID_REQUEST, message: "Empty batch" };
  if (body.length > MCP_MAX_BATCH)
    return { code: INVALID_REQUEST, message: `Batch too large: ${body.length} messages (max ${MCP_MAX_BATCH})` };
  return null;
}

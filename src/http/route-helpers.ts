import type { Context } from "hono";
import type { z } from "zod";
import { fromRpcError, invalid, SwitchboardError } from "../errors";
import { keyContextOf, type ParsedKey, parseSessionKey } from "../keys";
import type { AppEnv } from "./app-env";
import { authorizeKey } from "./auth";

/** Validate a body with a zod schema; a 400 names the first bad field. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) {
    const i = r.error.issues[0];
    throw invalid(`${i.path.join(".") || "body"}: ${i.message}`);
  }
  return r.data;
}

/** Parse the `{key}` path segment for the caller's principal and check it may address that session. */
export function targetOf(c: Context<AppEnv>): ParsedKey {
  const principal = c.get("principal");
  const agent = principal.role === "operator" ? undefined : principal.agentId;
  const parsed = parseSessionKey(
    c.req.param("key") ?? "",
    keyContextOf(c.get("cfg"), agent, principal.role === "run" ? principal.sessionKey : undefined),
  );
  authorizeKey(principal, parsed);
  return parsed;
}

export function intParam(
  c: Context,
  name: string,
  opts: { min: number; max: number; def?: number },
): number | undefined {
  const v = c.req.query(name);
  if (v === undefined || v === "") return opts.def;
  if (!/^-?\d+$/.test(v)) throw invalid(`${name}: expected an integer`);
  const n = Number(v);
  if (n < opts.min) throw invalid(`${name}: must be >= ${opts.min}`);
  return Math.min(n, opts.max);
}

/** RPC errors from objects carry our error type across the boundary. */
export async function rpc<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromRpcError(err);
  }
}

/** Parse a JSON body into an object, with a 400 that says what was wrong. */
export async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new SwitchboardError("invalid_request", "Request body must be valid JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new SwitchboardError("invalid_request", "Request body must be a JSON object");
  return body as Record<string, unknown>;
}

export function methodNotAllowed(allowed: string): never {
  throw new SwitchboardError("method_not_allowed", `Method not allowed; use ${allowed}`);
}

import type { Context } from "hono";
import type { z } from "zod";
import { fromRpcError, invalid } from "../errors";
import { keyContextOf, parseSessionKey, type ParsedKey } from "../keys";
import type { AppEnv } from "./app";
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
  const parsed = parseSessionKey(c.req.param("key") ?? "", keyContextOf(c.get("cfg"), agent, principal.role === "run" ? principal.sessionKey : undefined));
  authorizeKey(principal, parsed);
  return parsed;
}

export function intParam(c: Context, name: string, opts: { min: number; max: number; def?: number }): number | undefined {
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

import type { Context } from "hono";
import { z } from "zod";
import { fromRpcError } from "../errors";
import { keyContextOf, type ParsedKey, parseSessionKey } from "../keys";
import type { AppEnv } from "./app-env";
import { authorizeKey } from "./auth";

/** The `{key}` path parameter of the session routes; `targetOf` parses and authorizes it. */
export const keyParam = z.object({
  key: z.string().describe("Session key (`agent:<id>:<rest>`, `main` or `current`), URL-encoded"),
});

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

/** RPC errors from objects carry our error type across the boundary. */
export async function rpc<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromRpcError(err);
  }
}

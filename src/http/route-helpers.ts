import type { Context } from "hono";
import { z } from "zod";
import { fromRpcError } from "../errors";
import { keyContextOf, MAX_KEY_LENGTH, type ParsedKey, parseSessionKey, SESSION_KEY_PATTERN } from "../keys";
import type { AppEnv } from "./app-env";
import { authorizeKey } from "./auth";

/** The `{key}` path parameter of the session routes; `targetOf` parses and authorizes it. */
export const keyParam = z.object({
  key: sessionKeyString().describe(
    'Session key (`agent:<id>:<rest>`, `main` or `current`; case-insensitive; `global` only under `session.scope = "global"`), URL-encoded',
  ),
});

/** A session key as the server takes it, for every schema that carries one to `parseSessionKey`. */
export function sessionKeyString() {
  return (
    z
      .string()
      .max(MAX_KEY_LENGTH, `sessionKey is too long (max ${MAX_KEY_LENGTH} characters)`)
      // The parser's own grammar as a pattern (src/keys.ts), so the document refuses what the server refuses;
      // a refused key is worded by the parser, as every other surface words it.
      .regex(new RegExp(SESSION_KEY_PATTERN), { error: (issue) => keyProblem(issue.input) })
  );
}

/** Why the parser refuses `raw` (any context: the grammar does not depend on it). */
function keyProblem(raw: unknown): string {
  try {
    parseSessionKey(
      String(raw),
      keyContextOf({ session: { mainKey: "main", scope: "per-sender" }, agents: { defaultId: "main" } }),
    );
  } catch (err) {
    if (err instanceof Error) return err.message;
  }
  // What the parser alone would take: blanks around the key, or a letter that only lower-cases into the grammar.
  return `Malformed session key "${String(raw).slice(0, 80)}": segments of a-z 0-9 _ . @ + = ! $ ~ , - joined by ":", no blanks`;
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

/** RPC errors from objects carry our error type across the boundary. */
export async function rpc<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromRpcError(err);
  }
}

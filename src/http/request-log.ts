import type { MiddlewareHandler } from "hono";
import { log, rememberSecrets } from "../log";
import { agentTokensOf } from "./agent-tokens";
import type { AppEnv } from "./app-env";
import type { Principal } from "./principal";

/** A caller's own request id is kept when it is short and plain (no log injection); anything else gets a fresh one. */
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The secrets among the bindings, so no log line prints them even inside an error message (src/log.ts). */
function bindingSecrets(env: Env): unknown[] {
  let agentTokens: string[] = [];
  try {
    agentTokens = Object.values(agentTokensOf(env));
  } catch {
    // A malformed AGENT_TOKENS is refused by authentication; its raw text is scrubbed below.
  }
  return [env.GATEWAY_TOKEN, env.SIGNING_SECRET, env.SIGNING_SECRET_PREVIOUS, env.AGENT_TOKENS, ...agentTokens];
}

/**
 * First middleware: a request id for every request (`X-Request-Id`, in the response and in every log
 * line of the request) and one `request` log line when the response is ready. The path is logged
 * without its query string; headers never are.
 */
export const requestLog: MiddlewareHandler<AppEnv> = async (c, next) => {
  const given = c.req.header("X-Request-Id");
  const requestId = given && CALLER_REQUEST_ID.test(given) ? given : crypto.randomUUID();
  c.set("requestId", requestId);
  rememberSecrets(bindingSecrets(c.env));
  const started = Date.now();
  await next();
  c.header("X-Request-Id", requestId);
  const principal = c.get("principal");
  log.info("request", {
    requestId,
    method: c.req.method,
    path: new URL(c.req.url).pathname,
    status: c.res.status,
    ms: Date.now() - started,
    ...(principal ? callerFields(principal) : {}),
  });
};

/** Who called, never with what: a run token's run and session are named, the token itself is not. */
function callerFields(p: Principal): Record<string, string> {
  if (p.role === "operator") return { caller: "operator" };
  if (p.role === "agent") return { caller: "agent", agentId: p.agentId };
  return { caller: "run", agentId: p.agentId, sessionKey: p.sessionKey, runId: p.runId };
}

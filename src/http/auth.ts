import type { Context } from "hono";
import { isSessionSandboxed } from "../config/load";
import type { Config } from "../config/schema";
import { forbidden, SwitchboardError } from "../errors";
import { keyContextOf, type ParsedKey, parseSessionKey } from "../keys";
import { verifyRunToken } from "../runners/run-token";
import type { Caller } from "../tools/context";
import { agentTokensOf } from "./agent-tokens";
import type { AppEnv } from "./app-env";
import { addressKey, credentialKey } from "./auth-failure-keys";
import type { Principal } from "./principal";
import { authLimiter } from "./rate-limit";

/** The client's address as the edge saw it (`CF-Connecting-IP`; the first `X-Forwarded-For` hop only in local development). */
function clientAddress(c: Context): string | undefined {
  return c.req.header("CF-Connecting-IP") ?? c.req.header("X-Forwarded-For")?.split(",")[0];
}

/**
 * The principal of the request's bearer token. A valid token is accepted whatever failed before it, from
 * wherever (docs/limits.md): the failure limits only turn a *failing* request into a 429 — by its
 * credential's count or its address's (src/http/auth-failure-keys.ts, src/http/rate-limit.ts).
 */
export async function authenticate(c: Context<AppEnv>, cfg: Config): Promise<Principal> {
  const address = addressKey(clientAddress(c));
  // Validated before any token is looked at: a malformed AGENT_TOKENS fails every request closed (agent-tokens.ts).
  const agentTokens = agentTokensOf(c.env);
  const header = c.req.header("Authorization") ?? "";
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const fail = async (msg: string, credential?: string) => {
    const keys = credential ? [credential, address] : [address];
    // A key already over its limit: refused without counting further. Otherwise counted, and the failure
    // that goes over the limit is the 429 itself (src/http/rate-limit.ts).
    for (const key of keys) authLimiter.assertAllowed(key);
    await authLimiter.recordFailures(keys, c.env.AUTH_FAILURES, cfg.limits.authFailuresPerMinute);
    return new SwitchboardError("unauthorized", msg, { headers: { "WWW-Authenticate": 'Bearer realm="switchboard"' } });
  };
  if (!m) throw await fail("Missing bearer token: send Authorization: Bearer <token>");
  const token = m[1];
  const env = c.env;
  if (typeof env.GATEWAY_TOKEN === "string" && env.GATEWAY_TOKEN && (await safeEqual(token, env.GATEWAY_TOKEN)))
    return { role: "operator" };
  // Compare against every agent token (no early exit on a match position) so timing reveals nothing.
  let agentMatch: string | null = null;
  for (const [agentId, t] of Object.entries(agentTokens)) {
    if (await safeEqual(token, t)) agentMatch = agentId;
  }
  if (agentMatch) return { role: "agent", agentId: agentMatch };
  const run = await verifyRunToken(token, env);
  if (run) return run;
  throw await fail("Invalid bearer token", await credentialKey(token));
}

/** Constant-time comparison: compare fixed-length digests so neither length nor prefix leaks. */
export async function safeEqual(a: string, b: string): Promise<boolean> {
  const enc = new TextEncoder();
  const [da, db] = await Promise.all([
    crypto.subtle.digest("SHA-256", enc.encode(a)),
    crypto.subtle.digest("SHA-256", enc.encode(b)),
  ]);
  return crypto.subtle.timingSafeEqual(da, db);
}

/**
 * The requester session of a call: the given key (body `sessionKey` or `X-Session-Key`), else the
 * main session of the token's agent (the default agent for the operator). A token acting outside
 * its scope is a 403.
 */
export function callerFor(principal: Principal, cfg: Config, requestedKey?: string | null): Caller {
  if (principal.role === "run") {
    if (requestedKey) {
      const p = parseSessionKey(requestedKey, keyContextOf(cfg, principal.agentId, principal.sessionKey));
      if (p.canonicalKey !== principal.sessionKey)
        throw forbidden(`This run token may only act as session ${principal.sessionKey}`);
    }
    return {
      agentId: principal.agentId,
      sessionKey: principal.sessionKey,
      role: "run",
      runId: principal.runId,
      sandboxed: isSessionSandboxed(cfg, principal.agentId, principal.sessionKey),
      isSubagent: principal.isSubagent,
    };
  }
  const ctx = keyContextOf(cfg, principal.role === "agent" ? principal.agentId : undefined);
  const parsed = parseSessionKey(requestedKey || "main", ctx);
  authorizeKey(principal, parsed);
  return {
    agentId: parsed.agentId,
    sessionKey: parsed.canonicalKey,
    role: principal.role,
    sandboxed: isSessionSandboxed(cfg, parsed.agentId, parsed.canonicalKey),
    isSubagent: parsed.isSubagent,
  };
}

/**
 * The requester of a tool call (`/tools/invoke`, `/mcp`, `/v1/tools`): `callerFor` plus, for a
 * sub-agent, the depth its tool set depends on — one function so every surface offers the same tools.
 */
export function requesterOf(c: Context<AppEnv>, requestedKey?: string | null): Promise<Caller> {
  const cfg = c.get("cfg");
  return withSpawnDepth(c.env, cfg, callerFor(c.get("principal"), cfg, requestedKey));
}

/**
 * A sub-agent caller's depth decides whether it is an orchestrator (tools/registry.ts). It is only
 * read — one call to the caller's own object — when nested spawning is configured at all.
 */
export async function withSpawnDepth(env: Env, cfg: Config, caller: Caller): Promise<Caller> {
  if (!caller.isSubagent || caller.spawnDepth !== undefined || cfg.agents.defaults.subagents.maxSpawnDepth <= 1)
    return caller;
  const meta = await env.SESSIONS.getByName(caller.sessionKey).getMeta();
  return { ...caller, spawnDepth: meta?.spawnDepth ?? 1 };
}

/** May this principal address this session directly (REST reads and writes)? */
export function authorizeKey(principal: Principal, parsed: ParsedKey): void {
  if (principal.role === "operator") return;
  if (principal.role === "agent" && parsed.agentId !== principal.agentId) {
    throw forbidden(
      `The token of agent "${principal.agentId}" cannot act on session ${parsed.canonicalKey} (agent "${parsed.agentId}")`,
    );
  }
  if (principal.role === "run" && parsed.canonicalKey !== principal.sessionKey) {
    throw forbidden(`This run token may only act as session ${principal.sessionKey}`);
  }
}

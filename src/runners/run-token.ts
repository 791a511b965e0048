import { SwitchboardError } from "../errors";
import type { Principal } from "../http/principal";
import { FINAL_STATUSES } from "../session/types";

/**
 * Run tokens (docs/contract.md, "Authentication and scopes"): minted for each webhook run, they let the external runtime act as that
 * run's session — and nothing else — for as long as the run runs.
 *
 * Format: `sbrun.<base64url(JSON claims)>.<base64url(HMAC-SHA256(SIGNING_SECRET, "sbrun." + claims))>`.
 * Every claim (run, session, agent, sub-agent flag, expiry) is inside the MAC, so none can be swapped.
 * A valid MAC is not enough: the token is refused after its expiry (the run's deadline, when it has one) and
 * as soon as the run has ended, which is read from the run itself — no revocation list to keep. A run
 * without a deadline has a token without expiry: it dies with the run, which its lease ends if the runtime
 * goes quiet (src/session/run-queue.ts). `POST /v1/runs/{id}/heartbeat` re-issues the token.
 *
 * Key rotation: a token verifies with `SIGNING_SECRET` or, while a rotation is under way,
 * `SIGNING_SECRET_PREVIOUS`; new tokens are always signed with `SIGNING_SECRET` (docs/contract.md).
 */
export interface RunTokenClaims {
  runId: string;
  sessionKey: string;
  agentId: string;
  isSubagent: boolean;
  /** ms since epoch: the run's deadline; null for a run without one (the token lives as long as the run). */
  expiresAt: number | null;
}

const PREFIX = "sbrun";
const encoder = new TextEncoder();

function b64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromB64url(s: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error("not base64url");
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function hmacKey(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [usage]);
}

export async function mintRunToken(secret: string, claims: RunTokenClaims): Promise<string> {
  const body = `${PREFIX}.${b64url(encoder.encode(JSON.stringify({ v: 1, ...claims })))}`;
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret, "sign"), encoder.encode(body));
  return `${body}.${b64url(new Uint8Array(mac))}`;
}

/** The claims of a token whose MAC is valid, else null (expiry and run state are checked by the caller). */
async function readRunToken(secret: string, token: string): Promise<RunTokenClaims | null> {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== PREFIX || !secret || token.length > 4096) return null;
  try {
    const mac = fromB64url(parts[2]);
    // crypto.subtle.verify compares in constant time.
    const ok = await crypto.subtle.verify(
      "HMAC",
      await hmacKey(secret, "verify"),
      mac,
      encoder.encode(`${parts[0]}.${parts[1]}`),
    );
    if (!ok) return null;
    const c = JSON.parse(new TextDecoder().decode(fromB64url(parts[1]))) as Partial<RunTokenClaims> & { v?: number };
    if (
      c.v !== 1 ||
      typeof c.runId !== "string" ||
      typeof c.sessionKey !== "string" ||
      typeof c.agentId !== "string" ||
      typeof c.isSubagent !== "boolean" ||
      (typeof c.expiresAt !== "number" && c.expiresAt !== null)
    )
      return null;
    return {
      runId: c.runId,
      sessionKey: c.sessionKey,
      agentId: c.agentId,
      isSubagent: c.isSubagent,
      expiresAt: c.expiresAt,
    };
  } catch {
    return null;
  }
}

function expired(message: string): SwitchboardError {
  return new SwitchboardError("unauthorized", message, {
    headers: { "WWW-Authenticate": 'Bearer realm="switchboard", error="invalid_token"' },
  });
}

/** The secrets a run token may be signed with: the current one, then the previous one during a rotation. */
export function verificationSecrets(env: Env): string[] {
  return [env.SIGNING_SECRET, env.SIGNING_SECRET_PREVIOUS].filter(
    (s): s is string => typeof s === "string" && s.length > 0,
  );
}

/**
 * The auth hook: a forged or malformed token is "not a run token" (null → the usual 401 and failure
 * count); a genuine token past its time gets a 401 that says why, so the runtime stops retrying.
 */
export async function verifyRunToken(token: string, env: Env, now = Date.now()): Promise<Principal | null> {
  if (!token.startsWith(`${PREFIX}.`)) return null;
  let claims: RunTokenClaims | null = null;
  for (const secret of verificationSecrets(env)) {
    claims = await readRunToken(secret, token);
    if (claims) break;
  }
  if (!claims) return null;
  if (claims.expiresAt !== null && now >= claims.expiresAt)
    throw expired(`Run token expired: run ${claims.runId} passed its deadline`);
  const run = await env.SESSIONS.getByName(claims.sessionKey).getRun(claims.runId);
  if (!run || FINAL_STATUSES.has(run.status))
    throw expired(`Run token no longer valid: run ${claims.runId} has ended${run ? ` (${run.status})` : ""}`);
  return {
    role: "run",
    agentId: claims.agentId,
    sessionKey: claims.sessionKey,
    runId: claims.runId,
    isSubagent: claims.isSubagent,
  };
}

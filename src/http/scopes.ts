import type { Context } from "hono";
import { forbidden } from "../errors";
import type { AppEnv } from "./app-env";
import type { Principal } from "./principal";

/**
 * What each token may do beyond whose sessions it addresses (auth.ts decides that):
 *  - a run token (a webhook runtime) calls the tools as its run's session (`/tools/invoke`, `/mcp`,
 *    `GET /v1/tools`), reads its own session, and completes and heartbeats its own run — nothing else. Every other
 *    `/v1` write is refused here, by method, so a write route added later is covered without a check
 *    of its own (test/http/token-scopes.test.ts);
 *  - changing a session's send policy (PATCH `sendPolicy`, an owner's `/send`) is the operator's.
 */
const READ_METHODS = new Set(["GET", "HEAD"]);
const RUN_TOKEN_WRITES = /^\/v1\/runs\/[^/]+\/(complete|heartbeat)\/?$/;

export async function runTokenWriteScope(c: Context<AppEnv>, next: () => Promise<void>): Promise<void> {
  const principal = c.get("principal");
  if (
    principal.role === "run" &&
    !READ_METHODS.has(c.req.method) &&
    !RUN_TOKEN_WRITES.test(new URL(c.req.url).pathname)
  ) {
    throw forbidden(
      `A run token may call the tools and POST /v1/runs/${principal.runId}/complete or /heartbeat; ${c.req.method} ${new URL(c.req.url).pathname} needs an agent or operator token`,
    );
  }
  await next();
}

/** Send-policy changes (PATCH `sendPolicy`, `senderIsOwner` on an inbound message) need the operator token. */
export function assertOperator(principal: Principal, what: string): void {
  if (principal.role !== "operator") throw forbidden(`${what} needs the operator token (GATEWAY_TOKEN)`);
}

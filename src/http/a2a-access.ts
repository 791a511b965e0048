import { A2A_VERSION_HEADER } from "@a2a-js/sdk";
import { defaultServerCallContextBuilder, type ServerCallContext } from "@a2a-js/sdk/server";
import type { Context } from "hono";
import { z } from "zod";
import { SwitchboardA2AHandler } from "../a2a/handler";
import { findAgent } from "../config/load";
import { forbidden, invalid, notFound } from "../errors";
import { EVENT_ID_MAX_CHARS, EVENT_ID_PATTERN } from "../events/event-ids";
import type { AppEnv } from "./app-env";
import { authenticate } from "./auth";
import { idempotencyScope } from "./principal";

/**
 * Who may call an agent's A2A endpoints, shared by both bindings (src/http/routes/a2a.ts, JSON-RPC;
 * src/http/routes/a2a-rest.ts, HTTP+JSON), so they answer the same request the same way: the gateway token or
 * that agent's own (the security schemes of its card, src/a2a/card.ts); an unknown agent is a 404.
 */

export const agentParam = z.object({ agentId: z.string().max(64).describe("A configured agent's id") });

export function agentOf(c: Context<AppEnv>, agentId: string) {
  const agent = findAgent(c.get("cfg"), agentId.toLowerCase());
  if (!agent) throw notFound(`Unknown agent "${agentId}"`);
  return agent;
}

/** The authenticated caller's A2A handler for `agentId`, and the SDK's call context of this request. */
export async function a2aCallOf(
  c: Context<AppEnv>,
  agentId: string,
): Promise<{ handler: SwitchboardA2AHandler; context: ServerCallContext }> {
  const cfg = c.get("cfg");
  const principal = await authenticate(c, cfg);
  const agent = agentOf(c, agentId);
  if (principal.role === "run") throw forbidden("A2A needs the gateway token or the agent's token, not a run token");
  if (principal.role === "agent" && principal.agentId !== agent.id)
    throw forbidden(`The token of agent "${principal.agentId}" cannot act as agent "${agent.id}"`);
  const lastEventId = c.req.header("Last-Event-ID") ?? null;
  if (lastEventId !== null && (lastEventId.length > EVENT_ID_MAX_CHARS || !EVENT_ID_PATTERN.test(lastEventId)))
    throw invalid("Last-Event-ID: expected the `id` of an event of this task's stream");
  const handler = new SwitchboardA2AHandler({
    env: c.env,
    cfg,
    agent,
    origin: new URL(c.req.url).origin,
    idempotencyScope: idempotencyScope(principal),
    lastEventId,
  });
  const context = defaultServerCallContextBuilder({
    extensions: undefined,
    user: undefined,
    headers: Object.fromEntries(c.req.raw.headers),
    requestedVersion: c.req.header(A2A_VERSION_HEADER) || undefined,
  });
  return { handler, context };
}

import { AgentCard } from "@a2a-js/sdk";
import { JsonRpcTransportHandler, validateVersion } from "@a2a-js/sdk/server";
import { type Context, Hono } from "hono";
import { resolver } from "hono-openapi";
import { agentCard } from "../../a2a/card";
import { EVENT_ID_META } from "../../a2a/stream";
import { defaultAgentId } from "../../config/load";
import { a2aCallOf, agentOf, agentParam } from "../a2a-access";
import { sseEvent, sseResponse } from "../a2a-sse";
import { a2aCardSchema, a2aRpcRequestSchema, a2aRpcResponseSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { routeDoc } from "../route-doc";
import { A2A_CARD_TEXT, A2A_RPC_TEXT } from "../route-texts";
import { valid } from "../validate";

const cardResponse = (c: Context<AppEnv>, agentId: string) =>
  c.json(AgentCard.toJSON(agentCard(new URL(c.req.url).origin, agentOf(c, agentId))) as Record<string, unknown>);

const cardDoc = (summary: string, errors: (400 | 404)[]) =>
  routeDoc({
    tag: "agents",
    summary,
    description: A2A_CARD_TEXT,
    ok: { description: "The A2A agent card", schema: a2aCardSchema },
    public: true,
    errors,
  });

type RpcAnswer = { jsonrpc: string; id: string | number | null; result?: unknown; error?: unknown };

/** One SSE event per JSON-RPC answer; an update that carries our event id gets it as the SSE `id:` (resume point). */
function sseOf(answer: RpcAnswer): string {
  const r = answer.result as Record<string, { metadata?: Record<string, unknown> }> | undefined;
  return sseEvent(answer, r && (r.statusUpdate ?? r.artifactUpdate)?.metadata?.[EVENT_ID_META]);
}

/** A streaming method's answers as SSE (src/http/a2a-sse.ts); a refusal before the first is a JSON-RPC error. */
async function streamAnswer(stream: AsyncGenerator<RpcAnswer>, requestId: RpcAnswer["id"]): Promise<Response> {
  const first = await stream.next().catch((err: unknown) => ({ err }));
  if ("err" in first)
    return Response.json({
      jsonrpc: "2.0",
      id: requestId,
      error: JsonRpcTransportHandler.mapToJSONRPCError(first.err),
    });
  return sseResponse(first, stream, sseOf, (err) =>
    sseEvent(
      { jsonrpc: "2.0", id: requestId, error: JsonRpcTransportHandler.mapToJSONRPCError(err) },
      undefined,
      "error",
    ),
  );
}

/**
 * A2A (docs/protocols.md, "A2A"): every configured agent is an A2A agent. Its card is public at
 * `/a2a/{agentId}/.well-known/agent-card.json` (the default agent's also at `/.well-known/agent-card.json`);
 * `POST /a2a/{agentId}` is its JSON-RPC endpoint, served by the official SDK's transport handler over
 * src/a2a/handler.ts, with our bearer tokens: the gateway's, or that agent's own.
 */
export const a2aApp = new Hono<AppEnv>()
  .get("/.well-known/agent-card.json", cardDoc("A2A agent card of the default agent", []), (c) =>
    cardResponse(c, defaultAgentId(c.get("cfg"))),
  )
  .get(
    "/a2a/:agentId/.well-known/agent-card.json",
    cardDoc("An agent's A2A agent card", [400, 404]),
    valid("param", agentParam),
    (c) => cardResponse(c, c.req.valid("param").agentId),
  )
  .post(
    "/a2a/:agentId",
    routeDoc({
      tag: "agents",
      summary: "An agent's A2A endpoint (JSON-RPC binding, A2A v1)",
      description: A2A_RPC_TEXT,
      requestBody: {
        required: true,
        content: { "application/json": { schema: resolver(a2aRpcRequestSchema) } },
      },
      ok: {
        description: "The JSON-RPC answer, or for SendStreamingMessage and SubscribeToTask a text/event-stream of them",
        schema: a2aRpcResponseSchema,
      },
      errors: [400, 403, 404, 413],
    }),
    valid("param", agentParam),
    async (c) => {
      const { handler, context } = await a2aCallOf(c, c.req.valid("param").agentId);
      const raw = await c.req.text();
      let id: RpcAnswer["id"] = null;
      try {
        id = (JSON.parse(raw) as { id?: RpcAnswer["id"] })?.id ?? null;
        // A2A v1 only (the version its card lists); no header means a 0.3 client, refused by name.
        validateVersion(context.requestedVersion, await handler.getAgentCard(), "JSONRPC");
      } catch (err) {
        if (err instanceof SyntaxError)
          return c.json({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
        return c.json({ jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(err) });
      }
      const answer = await new JsonRpcTransportHandler(handler).handle(raw, context);
      if (Symbol.asyncIterator in answer) return streamAnswer(answer, id);
      return c.json(answer);
    },
  );

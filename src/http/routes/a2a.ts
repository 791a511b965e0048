import { A2A_VERSION_HEADER, AgentCard } from "@a2a-js/sdk";
import { defaultServerCallContextBuilder, JsonRpcTransportHandler, validateVersion } from "@a2a-js/sdk/server";
import { type Context, Hono } from "hono";
import { resolver } from "hono-openapi";
import { z } from "zod";
import { agentCard } from "../../a2a/card";
import { SwitchboardA2AHandler } from "../../a2a/handler";
import { EVENT_ID_META } from "../../a2a/stream";
import { defaultAgentId, findAgent } from "../../config/load";
import { forbidden, invalid, notFound } from "../../errors";
import { EVENT_ID_MAX_CHARS, EVENT_ID_PATTERN } from "../../events/event-ids";
import { a2aCardSchema, a2aRpcRequestSchema, a2aRpcResponseSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { authenticate } from "../auth";
import { idempotencyScope } from "../principal";
import { routeDoc } from "../route-doc";
import { A2A_CARD_TEXT, A2A_RPC_TEXT } from "../route-texts";
import { valid } from "../validate";

const agentParam = z.object({ agentId: z.string().max(64).describe("A configured agent's id") });

function agentOf(c: Context<AppEnv>, agentId: string) {
  const agent = findAgent(c.get("cfg"), agentId.toLowerCase());
  if (!agent) throw notFound(`Unknown agent "${agentId}"`);
  return agent;
}

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
function sseOf(answer: RpcAnswer, event?: string): string {
  const r = answer.result as Record<string, { metadata?: Record<string, unknown> }> | undefined;
  const eventId = r && (r.statusUpdate ?? r.artifactUpdate)?.metadata?.[EVENT_ID_META];
  return `${typeof eventId === "string" ? `id: ${eventId}\n` : ""}${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(answer)}\n\n`;
}

/**
 * A streaming method's answers as SSE. The first is awaited before answering, so a refusal (unknown task, bad
 * message) is a plain JSON-RPC error, not a stream; after that each answer is written as it comes, pulled by the
 * reader (a slow reader holds the run stream's own bounded buffer, src/events/sse-bridge.ts).
 */
async function streamAnswer(stream: AsyncGenerator<RpcAnswer>, requestId: RpcAnswer["id"]): Promise<Response> {
  const first = await stream.next().catch((err: unknown) => ({ err }));
  if ("err" in first)
    return Response.json({
      jsonrpc: "2.0",
      id: requestId,
      error: JsonRpcTransportHandler.mapToJSONRPCError(first.err),
    });
  const encoder = new TextEncoder();
  let pending: string | null = first.done ? null : sseOf(first.value);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pending !== null) {
        controller.enqueue(encoder.encode(pending));
        pending = null;
        return;
      }
      try {
        const next = await stream.next();
        if (next.done) controller.close();
        else controller.enqueue(encoder.encode(sseOf(next.value)));
      } catch (err) {
        const error = JsonRpcTransportHandler.mapToJSONRPCError(err);
        controller.enqueue(encoder.encode(sseOf({ jsonrpc: "2.0", id: requestId, error }, "error")));
        controller.close();
      }
    },
    async cancel() {
      await stream.return(undefined);
    },
  });
  if (first.done) pending = null;
  return new Response(body, {
    headers: {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      "X-Accel-Buffering": "no",
    },
  });
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
      const cfg = c.get("cfg");
      const principal = await authenticate(c, cfg);
      const agent = agentOf(c, c.req.valid("param").agentId);
      // The gateway's token, or this agent's own: the security schemes its card lists (src/a2a/card.ts).
      if (principal.role === "run")
        throw forbidden("A2A needs the gateway token or the agent's token, not a run token");
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
      const raw = await c.req.text();
      const context = defaultServerCallContextBuilder({
        extensions: undefined,
        user: undefined,
        headers: Object.fromEntries(c.req.raw.headers),
        requestedVersion: c.req.header(A2A_VERSION_HEADER) || undefined,
      });
      let id: RpcAnswer["id"] = null;
      try {
        id = (JSON.parse(raw) as { id?: RpcAnswer["id"] })?.id ?? null;
        // A2A v1 only (its card's one interface); no header means a 0.3 client, refused by name.
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

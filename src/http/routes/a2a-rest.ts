import {
  A2A_CONTENT_TYPE,
  ListTaskPushNotificationConfigsResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import {
  A2AError,
  ContentTypeNotSupportedError,
  RequestMalformedError,
  restStatusFor,
  toRestErrorBody,
} from "@a2a-js/sdk/errors";
import type { ServerCallContext } from "@a2a-js/sdk/server";
import { validateVersion } from "@a2a-js/sdk/server";
import { type Context, Hono } from "hono";
import { z } from "zod";
import type { SwitchboardA2AHandler } from "../../a2a/handler";
import { EVENT_ID_META } from "../../a2a/stream";
import { notFound } from "../../errors";
import { a2aCallOf, agentParam } from "../a2a-access";
import { sseEvent, sseResponse } from "../a2a-sse";
import { a2aRestRefusalSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { type RouteDoc, routeDoc } from "../route-doc";
import { A2A_REST_TEXT } from "../route-texts";
import { valid } from "../validate";

/**
 * A2A's HTTP+JSON binding (docs/protocols.md, "A2A"), at the paths the official SDK's REST transport uses
 * (`@a2a-js/sdk` 1.3.0: `RestTransport` in the client, `restHandler` for Express on the server), under each
 * agent's A2A URL — the same URL its card lists for both bindings. Every route answers from the same
 * SwitchboardA2AHandler as JSON-RPC (src/a2a/handler.ts), through the same access check (src/http/a2a-access.ts):
 * only the encoding differs. A2A errors are the SDK's REST error body with its HTTP status; ours (401, 403, an
 * unknown agent's 404, 413) keep the envelope.
 */

type Ctx = Context<AppEnv>;
type Call = { handler: SwitchboardA2AHandler; context: ServerCallContext };

const taskRefParam = agentParam.extend({
  taskRef: z.string().max(1100).describe("A task id (GET), or `{id}:cancel` / `{id}:subscribe` (POST)"),
});
const taskParam = agentParam.extend({ taskId: z.string().max(1100).describe("The task id (= the run id)") });
const configParam = taskParam.extend({ configId: z.string().max(64).describe("The push-notification config id") });

const jsonBody = { required: true, content: { "application/json": { schema: { type: "object" } } } };

/** `body`: the route reads a JSON body; `post`: a POST, which the body limit may refuse (413) even without one. */
function restDoc(summary: string, ok: RouteDoc["ok"], body = false, post = body) {
  return routeDoc({
    tag: "agents",
    summary,
    description: A2A_REST_TEXT,
    ...(body ? { requestBody: jsonBody } : {}),
    ok,
    errors: post ? [403, 413] : [403],
    otherResponses: {
      400: {
        description: "An A2A error (malformed request, not cancelable, unsupported) or invalid input",
        schema: a2aRestRefusalSchema,
      },
      404: { description: "Task not found (an A2A error), or an unknown agent", schema: a2aRestRefusalSchema },
    },
  });
}

const a2aJson = (description: string, status?: 200 | 201) => ({ status, description, contentType: A2A_CONTENT_TYPE });

/** An A2A error as the binding answers it; anything else is ours, for the app's envelope. */
function refusal(err: unknown): Response {
  if (!(err instanceof A2AError)) throw err;
  const status = restStatusFor(err);
  return Response.json(toRestErrorBody(err, status), { status });
}

/** The caller's handler, after the version check of this binding (A2A v1 only; no header means a 0.3 client). */
async function callOf(c: Ctx, agentId: string): Promise<Call> {
  const call = await a2aCallOf(c, agentId);
  validateVersion(call.context.requestedVersion, await call.handler.getAgentCard(), "HTTP+JSON");
  return call;
}

/** A request body: JSON (`application/json` or `application/a2a+json`), an object. */
async function bodyOf(c: Ctx): Promise<Record<string, unknown>> {
  const type = (c.req.header("Content-Type") ?? "").split(";", 1)[0].trim().toLowerCase();
  if (type && type !== "application/json" && type !== A2A_CONTENT_TYPE)
    throw new ContentTypeNotSupportedError(`Unsupported Content-Type "${type}"; expected application/json`);
  const raw = await c.req.text();
  if (!raw.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new RequestMalformedError("Invalid JSON payload.");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new RequestMalformedError("The body must be a JSON object");
  return parsed as Record<string, unknown>;
}

const answer = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": A2A_CONTENT_TYPE } });

/** A stream: refused before its first item with the binding's error; then `StreamResponse`s, ids as resume points. */
async function streamed(stream: AsyncGenerator<StreamResponse>): Promise<Response> {
  const first = await stream.next().catch((err: unknown) => ({ err }));
  if ("err" in first) return refusal(first.err);
  const eventIdOf = (e: StreamResponse) =>
    e.payload?.$case === "statusUpdate" || e.payload?.$case === "artifactUpdate"
      ? e.payload.value.metadata?.[EVENT_ID_META]
      : undefined;
  return sseResponse(
    first,
    stream,
    (e) => sseEvent(StreamResponse.toJSON(e), eventIdOf(e)),
    (err) => sseEvent(toRestErrorBody(err, restStatusFor(err)), undefined, "error"),
  );
}

/** Run one method; an A2A error it throws is this binding's error answer. */
async function serve(c: Ctx, agentId: string, method: (call: Call) => Promise<Response>): Promise<Response> {
  try {
    return await method(await callOf(c, agentId));
  } catch (err) {
    return refusal(err);
  }
}

const RUN_ID_AND_VERB = /^(.+):(cancel|subscribe)$/;

export const a2aRestApp = new Hono<AppEnv>()
  .post(
    "/a2a/:agentId/message:send",
    restDoc("A2A SendMessage (HTTP+JSON binding)", a2aJson("`SendMessageResponse`: `{task}`"), true),
    valid("param", agentParam),
    (c) =>
      serve(c, c.req.valid("param").agentId, async ({ handler }) => {
        const params = SendMessageRequest.fromJSON(await bodyOf(c));
        const result = await handler.sendMessage(params);
        const payload =
          "artifacts" in result
            ? { $case: "task" as const, value: result }
            : { $case: "message" as const, value: result };
        return answer(SendMessageResponse.toJSON({ payload }));
      }),
  )
  .post(
    "/a2a/:agentId/message:stream",
    restDoc(
      "A2A SendStreamingMessage (HTTP+JSON binding)",
      { description: "`StreamResponse` events", contentType: "text/event-stream" },
      true,
    ),
    valid("param", agentParam),
    (c) =>
      serve(c, c.req.valid("param").agentId, async ({ handler }) =>
        streamed(handler.sendMessageStream(SendMessageRequest.fromJSON(await bodyOf(c)))),
      ),
  )
  .get(
    "/a2a/:agentId/tasks/:taskRef",
    restDoc("A2A GetTask (HTTP+JSON binding)", a2aJson("The `Task`")),
    valid("param", taskRefParam),
    (c) => {
      const { agentId, taskRef } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) => {
        // After the access check, like every refusal of this binding: an unauthenticated caller learns nothing.
        if (RUN_ID_AND_VERB.test(taskRef)) throw notFound(`GET ${taskRef}: use POST for :cancel and :subscribe`);
        return answer(Task.toJSON(await handler.getTask({ tenant: "", id: taskRef })));
      });
    },
  )
  .post(
    "/a2a/:agentId/tasks/:taskRef",
    restDoc(
      "A2A CancelTask (`{id}:cancel`) and SubscribeToTask (`{id}:subscribe`), HTTP+JSON binding",
      {
        description: "`{id}:cancel`: the `Task`; `{id}:subscribe`: `StreamResponse` events (`Last-Event-ID` resumes)",
        contentType: [A2A_CONTENT_TYPE, "text/event-stream"],
      },
      false,
      true,
    ),
    valid("param", taskRefParam),
    (c) => {
      const { agentId, taskRef } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) => {
        const m = RUN_ID_AND_VERB.exec(taskRef);
        if (!m) throw notFound(`POST ${taskRef}: expected {id}:cancel or {id}:subscribe`);
        const [, id, verb] = m;
        return verb === "cancel"
          ? answer(Task.toJSON(await handler.cancelTask({ tenant: "", id, metadata: undefined })))
          : streamed(handler.resubscribe({ tenant: "", id }));
      });
    },
  )
  .post(
    "/a2a/:agentId/tasks/:taskId/pushNotificationConfigs",
    restDoc("A2A CreateTaskPushNotificationConfig (HTTP+JSON binding)", a2aJson("The stored config", 201), true),
    valid("param", taskParam),
    (c) => {
      const { agentId, taskId } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) => {
        const params = TaskPushNotificationConfig.fromJSON({ ...(await bodyOf(c)), taskId });
        return answer(TaskPushNotificationConfig.toJSON(await handler.createTaskPushNotificationConfig(params)), 201);
      });
    },
  )
  .get(
    "/a2a/:agentId/tasks/:taskId/pushNotificationConfigs",
    restDoc("A2A ListTaskPushNotificationConfigs (HTTP+JSON binding)", a2aJson("`{configs, nextPageToken}`")),
    valid("param", taskParam),
    (c) => {
      const { agentId, taskId } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) =>
        answer(
          ListTaskPushNotificationConfigsResponse.toJSON(
            await handler.listTaskPushNotificationConfigs({ tenant: "", taskId, pageSize: 0, pageToken: "" }),
          ),
        ),
      );
    },
  )
  .get(
    "/a2a/:agentId/tasks/:taskId/pushNotificationConfigs/:configId",
    restDoc("A2A GetTaskPushNotificationConfig (HTTP+JSON binding)", a2aJson("The config (credentials redacted)")),
    valid("param", configParam),
    (c) => {
      const { agentId, taskId, configId } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) =>
        answer(
          TaskPushNotificationConfig.toJSON(
            await handler.getTaskPushNotificationConfig({ tenant: "", taskId, id: configId }),
          ),
        ),
      );
    },
  )
  .delete(
    "/a2a/:agentId/tasks/:taskId/pushNotificationConfigs/:configId",
    restDoc("A2A DeleteTaskPushNotificationConfig (HTTP+JSON binding)", {
      status: 204,
      description: "Deleted (or was not there)",
    }),
    valid("param", configParam),
    (c) => {
      const { agentId, taskId, configId } = c.req.valid("param");
      return serve(c, agentId, async ({ handler }) => {
        await handler.deleteTaskPushNotificationConfig({ tenant: "", taskId, id: configId });
        return new Response(null, { status: 204 });
      });
    },
  );

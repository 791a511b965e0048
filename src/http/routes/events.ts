import { Hono } from "hono";
import { z } from "zod";
import { invalid } from "../../errors";
import { EVENT_ID_MAX_CHARS, EVENT_ID_PATTERN } from "../../events/event-ids";
import { eventStreamResponse } from "../../events/sse-bridge";
import type { AppEnv } from "../app-env";
import type { Principal } from "../principal";
import { routeDoc } from "../route-doc";
import { keyParam, targetOf } from "../route-helpers";
import { RUN_EVENTS_TEXT, SESSION_EVENTS_TEXT } from "../route-texts";
import { valid } from "../validate";
import { runParam, runTarget } from "./runs";

const SSE = {
  description: "Server-sent events (`id`, `event`, `data` lines; docs/events.md)",
  contentType: "text/event-stream",
};

/** `Last-Event-ID` (header) or `lastEventId` (query, for clients that cannot set headers); the header wins. */
function resumePoint(header: string | undefined, query: string | undefined): string | null {
  const raw = header ?? query;
  if (raw === undefined || raw === "") return null;
  if (!EVENT_ID_PATTERN.test(raw))
    throw invalid(
      `${header !== undefined ? "Last-Event-ID" : "lastEventId"}: expected an event id of this stream (the \`id\` of an event, or 0)`,
    );
  return raw;
}

/** An event id as resumePoint takes it (empty: from the start), so the document states the grammar it checks. */
const RESUME_PATTERN = new RegExp(`^(?:${EVENT_ID_PATTERN.source.slice(1, -1)})?$`);
const resumeHeader = z.object({
  // Checked by resumePoint, whose message names the header as clients spell it (`Last-Event-ID`).
  "last-event-id": z
    .string()
    .max(EVENT_ID_MAX_CHARS)
    .optional()
    .meta({ pattern: RESUME_PATTERN.source })
    .describe("Resume after this event id"),
});
const resumeQuery = z.object({
  lastEventId: z
    .string()
    .max(EVENT_ID_MAX_CHARS)
    .regex(RESUME_PATTERN, { error: "expected an event id of this stream (the `id` of an event, or 0)" })
    .optional()
    .describe("Resume after this event id (when the header cannot be set)"),
});

/**
 * The object's URL for a watcher: which stream, where it resumes, and — opened with a run token — whose run's
 * token it was, so the stream ends when that run does (src/events/session-events.ts reads it).
 */
function watchUrl(principal: Principal, stream: "session" | "run", after: string | null, runId?: string): URL {
  const url = new URL("https://session/events");
  url.searchParams.set("stream", stream);
  if (runId !== undefined) url.searchParams.set("runId", runId);
  if (after !== null) url.searchParams.set("after", after);
  if (principal.role === "run") url.searchParams.set("authRun", principal.runId);
  return url;
}

const WATCH = { headers: { Upgrade: "websocket" } };

/**
 * The live event streams under `/v1` (docs/events.md): a session's changes, and one run's text as it is
 * generated. Each is the object's hibernatable WebSocket, bridged to SSE (src/events/sse-bridge.ts).
 */
export const eventsApp = new Hono<AppEnv>()
  .get(
    "/sessions/:key/events",
    routeDoc({
      tag: "sessions",
      summary: "The session's events (transcript appends, run and delivery changes) as server-sent events",
      description: SESSION_EVENTS_TEXT,
      ok: SSE,
      errors: [400, 403, 404, 429],
    }),
    valid("param", keyParam),
    valid("header", resumeHeader),
    valid("query", resumeQuery),
    async (c) => {
      const target = targetOf(c);
      const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").lastEventId);
      const stub = c.env.SESSIONS.getByName(target.canonicalKey);
      return eventStreamResponse(stub.fetch(watchUrl(c.get("principal"), "session", after), WATCH));
    },
  )
  .get(
    "/runs/:id/events",
    routeDoc({
      tag: "runs",
      summary: "A run's text as it is generated, its tool calls, then its final status (server-sent events)",
      description: RUN_EVENTS_TEXT,
      ok: SSE,
      errors: [400, 403, 404, 429],
    }),
    valid("param", runParam),
    valid("header", resumeHeader),
    valid("query", resumeQuery),
    async (c) => {
      const key = runTarget(c);
      const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").lastEventId);
      const url = watchUrl(c.get("principal"), "run", after, c.req.valid("param").id);
      return eventStreamResponse(c.env.SESSIONS.getByName(key).fetch(url, WATCH));
    },
  );

import type { Hono } from "hono";
import { z } from "zod";
import { invalid } from "../errors";
import { EVENT_ID_MAX_CHARS, EVENT_ID_PATTERN } from "../events/event-ids";
import { eventStreamResponse } from "../events/sse-bridge";
import type { AppEnv } from "./app-env";
import { routeDoc } from "./route-doc";
import { keyParam, targetOf } from "./route-helpers";
import { runTarget } from "./routes-runs";
import { valid } from "./validate";

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

const resumeHeader = z.object({
  "last-event-id": z.string().max(EVENT_ID_MAX_CHARS).optional().describe("Resume after this event id"),
});
const resumeQuery = z.object({
  lastEventId: z
    .string()
    .max(EVENT_ID_MAX_CHARS)
    .optional()
    .describe("Resume after this event id (when the header cannot be set)"),
});

/** The object's URL for a watcher: which stream, and where it resumes (src/events/session-events.ts reads it). */
function watchUrl(stream: "session" | "run", after: string | null, runId?: string): URL {
  const url = new URL("https://session/events");
  url.searchParams.set("stream", stream);
  if (runId !== undefined) url.searchParams.set("runId", runId);
  if (after !== null) url.searchParams.set("after", after);
  return url;
}

/** The live event streams (docs/events.md): the session's changes, and one run's text as it is generated. */
export function eventsRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/events",
    routeDoc({
      tag: "sessions",
      summary: "The session's events (transcript appends, run and delivery changes) as server-sent events",
      description:
        "Each event has an opaque `id`. `Last-Event-ID` (or `lastEventId`) resumes after it with nothing missed or repeated; an id of an earlier incarnation of the session (deleted and created again) starts over with a `reset` event; `0` replays everything retained; without it the stream starts live. The stream of a session that is deleted or archived ends with an `end` event. Heartbeat `: ping` every 15 s.",
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
      return eventStreamResponse(stub.fetch(watchUrl("session", after), { headers: { Upgrade: "websocket" } }));
    },
  );

  app.get(
    "/v1/runs/:id/events",
    routeDoc({
      tag: "runs",
      summary: "A run's text as it is generated, its tool calls, then its final status (server-sent events)",
      description:
        "Each event has an opaque `id`; `Last-Event-ID` (or `lastEventId`) resumes a running run after it without repeats, or starts over with a `reset` event and the current step's text so far when that point is no longer kept (docs/events.md). A run that already ended replays its reply as one `delta`, then `status`, and the stream closes.",
      ok: SSE,
      errors: [400, 403, 404, 429],
    }),
    valid("param", z.object({ id: z.string().max(1024).describe("Run id (`runId` of the run)") })),
    valid("header", resumeHeader),
    valid("query", resumeQuery),
    async (c) => {
      const key = runTarget(c);
      const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").lastEventId);
      const url = watchUrl("run", after, c.req.valid("param").id);
      return eventStreamResponse(c.env.SESSIONS.getByName(key).fetch(url, { headers: { Upgrade: "websocket" } }));
    },
  );
}

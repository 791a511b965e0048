import type { Hono } from "hono";
import { z } from "zod";
import { invalid } from "../errors";
import { eventStreamResponse } from "../events/sse-bridge";
import type { AppEnv } from "./app-env";
import { describe } from "./describe";
import { keyParam, targetOf } from "./route-helpers";
import { runTarget } from "./routes-runs";
import { valid } from "./validate";

const SSE = {
  description: "Server-sent events (`id`, `event`, `data` lines; docs/events.md)",
  contentType: "text/event-stream",
};
const RESUME_MAX_DIGITS = 16;

/** `Last-Event-ID` (header) or `lastEventId` (query, for clients that cannot set headers); the header wins. */
function resumePoint(header: string | undefined, query: string | undefined): number | null {
  const raw = header ?? query;
  if (raw === undefined || raw === "") return null;
  if (!/^\d+$/.test(raw) || raw.length > RESUME_MAX_DIGITS)
    throw invalid(
      `${header !== undefined ? "Last-Event-ID" : "lastEventId"}: expected a non-negative integer event id`,
    );
  return Number(raw);
}

/** The live event streams (docs/events.md): the session's changes, and one run's text as it is generated. */
export function eventsRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/events",
    describe({
      tag: "sessions",
      summary: "The session's events (transcript appends, run and delivery changes) as server-sent events",
      description:
        "Resumes after `Last-Event-ID` (or `lastEventId`) with nothing missed or repeated; without it the stream starts live. Heartbeat `: ping` every 15 s.",
      ok: SSE,
      errors: [400, 403, 404, 429],
    }),
    valid("param", keyParam),
    valid(
      "header",
      z.object({ "last-event-id": z.string().max(32).optional().describe("Resume after this event id") }),
    ),
    valid(
      "query",
      z.object({
        lastEventId: z
          .string()
          .max(32)
          .optional()
          .describe("Resume after this event id (when the header cannot be set)"),
      }),
    ),
    async (c) => {
      const target = targetOf(c);
      const after = resumePoint(c.req.valid("header")["last-event-id"], c.req.valid("query").lastEventId);
      const url = new URL("https://session/events");
      url.searchParams.set("stream", "session");
      if (after !== null) url.searchParams.set("after", String(after));
      const stub = c.env.SESSIONS.getByName(target.canonicalKey);
      return eventStreamResponse(stub.fetch(url, { headers: { Upgrade: "websocket" } }));
    },
  );

  app.get(
    "/v1/runs/:id/events",
    describe({
      tag: "runs",
      summary: "A run's text as it is generated, its tool calls, then its final status (server-sent events)",
      description: "A run that already ended replays its reply as one `delta`, then `status`, and the stream closes.",
      ok: SSE,
      errors: [400, 403, 404, 429],
    }),
    valid("param", z.object({ id: z.string().max(1024).describe("Run id (`runId` of the run)") })),
    async (c) => {
      const key = runTarget(c);
      const url = new URL("https://session/events");
      url.searchParams.set("stream", "run");
      url.searchParams.set("runId", c.req.valid("param").id);
      return eventStreamResponse(c.env.SESSIONS.getByName(key).fetch(url, { headers: { Upgrade: "websocket" } }));
    },
  );
}

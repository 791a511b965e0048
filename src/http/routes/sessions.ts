import { Hono } from "hono";
import type { z } from "zod";
import { defaultAgentId, findAgent } from "../../config/load";
import { invalid, notFound, SwitchboardError } from "../../errors";
import { dmSessionTarget } from "../../policy/dm-scope";
import { parseSendPolicyPatch } from "../../policy/send-policy";
import { sessionRowSchema } from "../../registry/row-schema";
import { sessionIndex } from "../../registry/session-index";
import { checkModelRef } from "../../runners/models";
import { INVALID_THINKING, parseThinkingLevel } from "../../runners/thinking";
import { checkTextSize } from "../../session/byte-budget";
import { deleteArchived } from "../../spawn/archive-delete";
import { archivedRow, archivedTranscript } from "../../spawn/archive-read";
import { readHistory } from "../../tools/sessions-history";
import { decodeCursor, encodeCursor, normalizeKinds } from "../../tools/sessions-list";
import {
  type AcceptedBody,
  acceptedSchema,
  deletedSchema,
  historyPageSchema,
  type SessionsPageBody,
  sessionsPageSchema,
} from "../api-schemas";
import type { AppEnv } from "../app-env";
import { idempotencyScope } from "../principal";
import { routeDoc } from "../route-doc";
import { keyParam, rpc, targetOf } from "../route-helpers";
import { INBOUND_MESSAGE_TEXT, SESSION_PATCH_TEXT, TRANSCRIPT_EXPORT_TEXT } from "../route-texts";
import { assertOperator } from "../scopes";
import { transcriptJsonl } from "../transcript-export";
import { valid } from "../validate";
import { sessionRecordsApp } from "./session-records";
import { historyQuery, inboundMessage, listQuery, normalizeLabel, sessionPatch } from "./session-schemas";

const JSONL = { "Content-Type": "application/x-ndjson; charset=utf-8" };

/** `/v1/sessions`: list, read, change and delete sessions, post inbound messages, read and export transcripts. */
export const sessionsApp = new Hono<AppEnv>()
  .post(
    "/:key/messages",
    routeDoc({
      tag: "sessions",
      summary: "Inbound message from a channel: queues a run",
      description: INBOUND_MESSAGE_TEXT,
      ok: { status: 202, description: "Run queued", schema: acceptedSchema },
      errors: [400, 403, 409, 413],
    }),
    valid("param", keyParam),
    valid("json", inboundMessage),
    async (c) => {
      const named = targetOf(c);
      const body = c.req.valid("json");
      // A DM posted to the agent's main session runs in the session session.dmScope names (policy/dm-scope.ts).
      const target = dmSessionTarget(c.get("cfg"), named, body);
      checkTextSize("message", body.message, c.get("cfg").limits.maxMessageBytes);
      // Refused rather than ignored: a channel gateway holding an agent token learns its claim had no effect.
      if (body.senderIsOwner === true) assertOperator(c.get("principal"), "senderIsOwner: true");
      const stub = c.env.SESSIONS.getByName(target.canonicalKey);
      const route = body.channel
        ? {
            channel: body.channel.toLowerCase(),
            to: body.to ?? null,
            accountId: body.accountId ?? null,
            threadId: body.threadId !== undefined ? String(body.threadId) : null,
            chatType: body.chatType ?? target.chatType,
            displayName: body.displayName,
          }
        : undefined;
      const run = await rpc(
        stub.enqueue({
          input: {
            kind: "inbound",
            message: body.message,
            provenance: { kind: "external_user" },
            route,
            deliver: body.deliver === true,
          },
          // Per principal: another token's identical key is another message (src/http/principal.ts).
          idempotencyKey: body.idempotencyKey
            ? `inbound:${idempotencyScope(c.get("principal"))}:${body.idempotencyKey}`
            : undefined,
          senderIsOwner: body.senderIsOwner === true,
        }),
      );
      // The session that runs it: a thread bound to a sub-agent forwards to the child (spawn/thread-binding.ts).
      return c.json({ runId: run.runId, status: "accepted", sessionKey: run.sessionKey } satisfies AcceptedBody, 202);
    },
  )
  .get(
    "/",
    routeDoc({
      tag: "sessions",
      summary: "List sessions of one agent (newest first, cursor-paged)",
      ok: { description: "A page of sessions", schema: sessionsPageSchema },
      errors: [400, 403, 404],
    }),
    valid("query", listQuery),
    async (c) => {
      const cfg = c.get("cfg");
      const principal = c.get("principal");
      const query = c.req.valid("query");
      const agentId = (
        query.agentId ?? (principal.role === "operator" ? defaultAgentId(cfg) : principal.agentId)
      ).toLowerCase();
      if (principal.role !== "operator" && agentId !== principal.agentId) {
        throw new SwitchboardError(
          "forbidden",
          `The token of agent "${principal.agentId}" cannot list sessions of agent "${agentId}"`,
        );
      }
      // Only configured agents have shards; an arbitrary id must not address (and create) a registry object.
      if (!findAgent(cfg, agentId))
        throw notFound(`Unknown agent "${agentId}" (configured: ${cfg.agents.roster.map((a) => a.id).join(", ")})`);
      const { limit, activeMinutes } = query;
      const kinds = normalizeKinds((query.kinds ?? "").split(","));
      const cursor = query.cursor ? decodeCursor(query.cursor) : undefined;
      const page = await sessionIndex(c.env, cfg, agentId).list({
        scope: principal.role === "run" ? { type: "self", key: principal.sessionKey } : { type: "agent" },
        kinds: kinds.length ? kinds : undefined,
        activeSince: activeMinutes ? Date.now() - activeMinutes * 60_000 : undefined,
        limit,
        cursor,
      });
      return c.json({
        count: page.rows.length,
        sessions: page.rows,
        nextCursor: page.next ? encodeCursor(page.next) : null,
      } satisfies SessionsPageBody);
    },
  )
  .get(
    "/:key",
    routeDoc({
      tag: "sessions",
      summary: "One session's row (an archived session's row comes from the archive)",
      ok: { description: "The session", schema: sessionRowSchema },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam),
    async (c) => {
      const target = targetOf(c);
      // An archived session has no live object: its index row (archived: true) answers.
      const live = await c.env.SESSIONS.getByName(target.canonicalKey).getRow();
      if (live) return c.json(live);
      const row = await archivedRow(c.env, target.canonicalKey);
      if (!row) throw notFound(`Session not found: ${target.canonicalKey}`);
      // Plain JSON; widened because the checker's walk of the row type through c.json is too deep here.
      return c.json(row as unknown as Record<string, unknown>);
    },
  )
  .patch(
    "/:key",
    routeDoc({
      tag: "sessions",
      summary: "Change label, model, thinking/verbose level or send policy",
      description: SESSION_PATCH_TEXT,
      ok: { description: "The updated session (created if it did not exist)", schema: sessionRowSchema },
      errors: [400, 403, 409, 413],
    }),
    valid("param", keyParam),
    valid("json", sessionPatch),
    async (c) => {
      const target = targetOf(c);
      const cfg = c.get("cfg");
      const body = c.req.valid("json");
      if (body.sendPolicy !== undefined) assertOperator(c.get("principal"), "Changing sendPolicy");
      const patch: Parameters<ReturnType<typeof c.env.SESSIONS.getByName>["patch"]>[0] = {};
      if (body.label !== undefined) patch.label = body.label === null ? null : normalizeLabel(body.label);
      if (body.model !== undefined) {
        if (body.model !== null) {
          const problem = checkModelRef(cfg, c.env, body.model);
          if (problem) throw invalid(problem);
        }
        patch.modelOverride = body.model === null ? null : body.model.trim();
      }
      if (body.thinkingLevel !== undefined) {
        // Refused by name rather than stored and ignored: the level reaches the model (src/runners/thinking.ts).
        const level = body.thinkingLevel === null ? null : parseThinkingLevel(body.thinkingLevel);
        if (level === undefined) throw invalid(`thinkingLevel: ${INVALID_THINKING(String(body.thinkingLevel))}`);
        patch.thinkingLevel = level;
      }
      if (body.verboseLevel !== undefined) patch.verboseLevel = body.verboseLevel;
      if (body.sendPolicy !== undefined) patch.sendPolicy = parseSendPolicyPatch(body.sendPolicy);
      if (Object.keys(patch).length === 0)
        throw invalid("body: nothing to change (label, model, thinkingLevel, verboseLevel, sendPolicy)");
      const row = await rpc(c.env.SESSIONS.getByName(target.canonicalKey).patch(patch));
      return c.json(row);
    },
  )
  .delete(
    "/:key",
    routeDoc({
      tag: "sessions",
      summary: "Delete a session (never `main`); an archived one with its archive",
      ok: { description: "Deleted", schema: deletedSchema },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam),
    async (c) => {
      const target = targetOf(c);
      if (target.kind === "main") throw invalid(`Cannot delete the main session (${target.canonicalKey}).`);
      const res = await rpc(c.env.SESSIONS.getByName(target.canonicalKey).deleteSession());
      if (!res.deleted) {
        // No live session: an archived one is deleted with its archive (src/spawn/archive-delete.ts).
        const row = await archivedRow(c.env, target.canonicalKey);
        if (!row) throw notFound(`Session not found: ${target.canonicalKey}`);
        await deleteArchived(c.env, target.canonicalKey, row);
      }
      return c.json({ ok: true, deleted: target.canonicalKey } satisfies z.infer<typeof deletedSchema>);
    },
  )
  .get(
    "/:key/history",
    routeDoc({
      tag: "sessions",
      summary: "A sanitized page of the transcript (same shape as sessions_history)",
      ok: { description: "History page (empty for a session that does not exist)", schema: historyPageSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", historyQuery),
    async (c) => {
      const target = targetOf(c);
      const { limit, before, includeTools } = c.req.valid("query");
      const result = await readHistory(c.env, target.canonicalKey, {
        limit,
        before,
        includeTools: includeTools === "true",
      });
      if (!result) throw notFound(`Session not found: ${target.canonicalKey}`);
      return c.json(result);
    },
  )
  .get(
    "/:key/transcript.jsonl",
    routeDoc({
      tag: "sessions",
      summary: "The whole transcript as JSON lines (streamed)",
      description: TRANSCRIPT_EXPORT_TEXT,
      ok: { description: "The transcript", contentType: "application/x-ndjson" },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam),
    async (c) => {
      const target = targetOf(c);
      const stub = c.env.SESSIONS.getByName(target.canonicalKey);
      const meta = await stub.getMeta();
      if (meta) return new Response(transcriptJsonl(meta, stub), { headers: JSONL });
      const row = await archivedRow(c.env, target.canonicalKey);
      const archived = row ? await archivedTranscript(c.env, row) : null;
      if (!archived) throw notFound(`Session not found: ${target.canonicalKey}`);
      return new Response(archived, { headers: { ...JSONL, "X-Switchboard-Archived": "true" } });
    },
  )
  .route("/", sessionRecordsApp);

import { Hono } from "hono";
import { z } from "zod";
import { forbidden, notFound, SwitchboardError } from "../../errors";
import { sessionIndex } from "../../registry/session-index";
import { sessionTreeSchema, subagentTree } from "../../registry/subagent-tree";
import { callExtension } from "../../session/extensions";
import { RUNS_LIST_MAX } from "../../session/runs-list-rpc";
import { servedMediaType } from "../../spawn/attachments";
import {
  attachmentsSchema,
  DELIVERY_STATUSES,
  deadTimersSchema,
  deliveriesSchema,
  deliverySchema,
  retriedTimerSchema,
  runsPageSchema,
} from "../api-schemas";
import type { AppEnv } from "../app-env";
import { routeDoc } from "../route-doc";
import { keyParam, rpc, targetOf } from "../route-helpers";
import { DEAD_TIMER_RETRY_TEXT, RUNS_LIST_TEXT } from "../route-texts";
import { intQuery, valid } from "../validate";

/** `attachment` with the file's name: an ASCII fallback, and the exact name percent-encoded (RFC 6266, RFC 8187). */
function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

const limitQuery = (max: number, def: number) =>
  z.object({ limit: intQuery({ min: 1, max, def, description: "Rows" }) });

const deliveriesQuery = z.object({
  status: z
    .enum(DELIVERY_STATUSES, { error: `expected one of ${DELIVERY_STATUSES.join(", ")}` })
    .optional()
    .describe("Only this status"),
  limit: intQuery({ min: 1, max: 500, def: 100, description: "Rows" }),
});

const deadTimerParam = keyParam.extend({
  kind: z.string().max(64, "at most 64 characters").describe("Timer kind"),
  ref: z.string().max(512, "at most 512 characters").describe("Timer ref"),
});

/**
 * What a session did and holds besides its transcript, each read from one of its extensions' RPC tables:
 * its recent runs (the console), its outbound deliveries with dead letters visible and re-queueable
 * (docs/contract.md, "Flows"), its timers that gave up (docs/timers.md), and a sub-agent's spawn
 * attachments (a webhook runtime with its run token may read only its own session's files), and its
 * sub-agent tree (the console's Sub-agents tab; src/registry/subagent-tree.ts).
 */
export const sessionRecordsApp = new Hono<AppEnv>()
  .get(
    "/:key/runs",
    routeDoc({
      tag: "runs",
      summary: "A session's most recent runs, newest first",
      description: RUNS_LIST_TEXT,
      ok: { description: "Runs", schema: runsPageSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", limitQuery(RUNS_LIST_MAX, 20)),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const { limit } = c.req.valid("query");
      const runs = await rpc(callExtension(c.env.SESSIONS.getByName(key), "runs", "list", { limit }));
      return c.json({ sessionKey: key, count: runs.length, runs } satisfies z.infer<typeof runsPageSchema>);
    },
  )
  .get(
    "/:key/deliveries",
    routeDoc({
      tag: "deliveries",
      summary: "Outbound deliveries of a session (outbox), including dead letters",
      ok: { description: "Deliveries, newest first", schema: deliveriesSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", deliveriesQuery),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const { status, limit } = c.req.valid("query");
      const { deliveries, truncated } = await rpc(
        callExtension(c.env.SESSIONS.getByName(key), "outbox", "list", { status, limit }),
      );
      // `truncated`: the listing reached its byte budget (docs/limits.md) before `limit` rows.
      return c.json({
        sessionKey: key,
        count: deliveries.length,
        deliveries,
        ...(truncated ? { truncated: true as const } : {}),
      } satisfies z.infer<typeof deliveriesSchema>);
    },
  )
  .post(
    "/:key/deliveries/:id/retry",
    routeDoc({
      tag: "deliveries",
      summary: "Re-queue a dead or blocked delivery",
      ok: { description: "The delivery, pending again", schema: deliverySchema },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam.extend({ id: z.string().max(256).describe("Delivery id") })),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const id = c.req.valid("param").id;
      const delivery = await rpc(callExtension(c.env.SESSIONS.getByName(key), "outbox", "retry", id));
      if (!delivery) throw notFound(`Delivery not found: ${id}`);
      return c.json(delivery satisfies z.infer<typeof deliverySchema>);
    },
  )
  .get(
    "/:key/timers/dead",
    routeDoc({
      tag: "deliveries",
      summary: "Timers that gave up after their attempts, newest first",
      ok: { description: "Dead timers", schema: deadTimersSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", limitQuery(100, 100)),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const limit = c.req.valid("query").limit;
      const timers = await rpc(callExtension(c.env.SESSIONS.getByName(key), "dead-timers", "list", { limit }));
      return c.json({ sessionKey: key, count: timers.length, timers } satisfies z.infer<typeof deadTimersSchema>);
    },
  )
  .post(
    "/:key/timers/dead/:kind/:ref/retry",
    routeDoc({
      tag: "deliveries",
      summary: "Re-queue a dead timer with a fresh attempt budget",
      description: DEAD_TIMER_RETRY_TEXT,
      ok: { description: "The timer, retried", schema: retriedTimerSchema },
      errors: [400, 403, 404, 409],
    }),
    valid("param", deadTimerParam),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const { kind, ref } = c.req.valid("param");
      const r = await rpc(callExtension(c.env.SESSIONS.getByName(key), "dead-timers", "retry", { kind, ref }));
      if (!r) throw notFound(`Dead timer not found: ${kind}/${ref}`);
      if (!r.retried)
        throw new SwitchboardError(
          "conflict",
          `Timer ${kind}/${ref} ended its flow when it died and cannot be retried; start the work again instead.`,
        );
      return c.json({ ...r.timer, retried: true as const } satisfies z.infer<typeof retriedTimerSchema>);
    },
  )
  .get(
    "/:key/attachments",
    routeDoc({
      tag: "sessions",
      summary: "Files attached to a sub-agent by sessions_spawn",
      ok: { description: "Attachments", schema: attachmentsSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const list = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachments"));
      return c.json({ sessionKey: key, count: list.length, attachments: list } satisfies z.infer<
        typeof attachmentsSchema
      >);
    },
  )
  .get(
    "/:key/attachments/:name",
    routeDoc({
      tag: "sessions",
      summary:
        "One attachment's bytes, as a download (Content-Type is the file's mimeType; X-Attachment-Sha256 its hash)",
      ok: { description: "The file", contentType: "application/octet-stream" },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam.extend({ name: z.string().max(512).describe("Attachment name") })),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const name = c.req.valid("param").name;
      const file = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachment", name));
      if (!file) throw notFound(`Attachment not found: ${name}`);
      // Served as a download and never rendered in this origin (the console's): a text/html or SVG attachment
      // written by an agent must not run as a page of the gateway. nosniff keeps browsers to the stated type.
      return new Response(file.data, {
        headers: {
          "Content-Type": servedMediaType(file.mimeType),
          "Content-Length": String(file.bytes),
          "Content-Disposition": contentDisposition(name),
          "X-Content-Type-Options": "nosniff",
          "Content-Security-Policy": "default-src 'none'; sandbox",
          "X-Attachment-Sha256": file.sha256,
        },
      });
    },
  )
  .get(
    "/:key/tree",
    routeDoc({
      tag: "sessions",
      summary: "A session's sub-agent tree: children, their status, run time, tokens and cost",
      description:
        "Read from the session index, level by level: at most 5 levels and 200 nodes (`truncated`). An agent token sees the nodes of its own agent.",
      ok: { description: "The tree", schema: sessionTreeSchema },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam),
    async (c) => {
      const principal = c.get("principal");
      // A run token acts as one session only; the tree lists others.
      if (principal.role === "run") throw forbidden("The sub-agent tree needs the operator token or an agent token");
      const target = targetOf(c);
      const cfg = c.get("cfg");
      // The index row is written behind the session's changes: a session created a moment ago answers from its object.
      const root =
        (await sessionIndex(c.env, cfg, target.agentId).get(target.canonicalKey))?.row ??
        (await c.env.SESSIONS.getByName(target.canonicalKey).getRow());
      if (!root) throw notFound(`Session not found: ${target.canonicalKey}`);
      const visible = (agentId: string) => principal.role === "operator" || agentId === principal.agentId;
      return c.json(await subagentTree(c.env, cfg, root, visible));
    },
  );

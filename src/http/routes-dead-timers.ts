import type { Hono } from "hono";
import { z } from "zod";
import { notFound, SwitchboardError } from "../errors";
import { callExtension } from "../session/extensions";
import { deadTimersSchema, retriedTimerSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { routeDoc } from "./route-doc";
import { keyParam, rpc, targetOf } from "./route-helpers";
import { intQuery, valid } from "./validate";

/** Timers that gave up after their attempts (docs/timers.md), beside the dead deliveries. */
export function deadTimersRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/timers/dead",
    routeDoc({
      tag: "deliveries",
      summary: "Timers that gave up after their attempts, newest first",
      ok: { description: "Dead timers", schema: deadTimersSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", z.object({ limit: intQuery({ min: 1, max: 100, def: 100, description: "Rows" }) })),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const limit = c.req.valid("query").limit;
      const timers = await rpc(callExtension(c.env.SESSIONS.getByName(key), "dead-timers", "list", { limit }));
      return c.json({ sessionKey: key, count: timers.length, timers } satisfies z.infer<typeof deadTimersSchema>);
    },
  );

  app.post(
    "/v1/sessions/:key/timers/dead/:kind/:ref/retry",
    routeDoc({
      tag: "deliveries",
      summary: "Re-queue a dead timer with a fresh attempt budget",
      description: "A 409 when its death ended a flow: start the work again instead.",
      ok: { description: "The timer, retried", schema: retriedTimerSchema },
      errors: [400, 403, 404, 409],
    }),
    valid(
      "param",
      keyParam.extend({
        kind: z.string().max(64, "at most 64 characters").describe("Timer kind"),
        ref: z.string().max(512, "at most 512 characters").describe("Timer ref"),
      }),
    ),
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
  );
}

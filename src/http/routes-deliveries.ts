import type { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../errors";
import { callExtension } from "../session/extensions";
import { DELIVERY_STATUSES, deliveriesSchema, deliverySchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { routeDoc } from "./route-doc";
import { keyParam, rpc, targetOf } from "./route-helpers";
import { intQuery, valid } from "./validate";

/**
 * The outbox over REST (docs/contract.md, "Flows"): what a session sent or tried to send, with dead
 * letters visible and re-queueable.
 */
export function deliveriesRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/deliveries",
    routeDoc({
      tag: "deliveries",
      summary: "Outbound deliveries of a session (outbox), including dead letters",
      ok: { description: "Deliveries, newest first", schema: deliveriesSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid(
      "query",
      z.object({
        status: z
          .enum(DELIVERY_STATUSES, { error: `expected one of ${DELIVERY_STATUSES.join(", ")}` })
          .optional()
          .describe("Only this status"),
        limit: intQuery({ min: 1, max: 500, def: 100, description: "Rows" }),
      }),
    ),
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
  );

  app.post(
    "/v1/sessions/:key/deliveries/:id/retry",
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
  );
}

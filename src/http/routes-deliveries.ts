import type { Hono } from "hono";
import type { DeliveryStatus } from "../channels/outbox";
import { invalid, notFound } from "../errors";
import { callExtension } from "../session/session-object";
import type { AppEnv } from "./app-env";
import { intParam, rpc, targetOf } from "./route-helpers";

const STATUSES: readonly DeliveryStatus[] = ["pending", "delivered", "blocked", "dead"];

/**
 * The outbox over REST (docs/contract.md, "Flows"): what a session sent or tried to send, with dead
 * letters visible and re-queueable.
 *   GET  /v1/sessions/{key}/deliveries?status=pending|delivered|blocked|dead&limit=
 *   POST /v1/sessions/{key}/deliveries/{id}/retry
 */
export function deliveriesRoutes(app: Hono<AppEnv>): void {
  app.get("/v1/sessions/:key/deliveries", async (c) => {
    const key = targetOf(c).canonicalKey;
    const status = c.req.query("status");
    if (status !== undefined && !(STATUSES as readonly string[]).includes(status))
      throw invalid(`status: expected one of ${STATUSES.join(", ")}`);
    const limit = intParam(c, "limit", { min: 1, max: 500, def: 100 })!;
    const { deliveries, truncated } = await rpc(
      callExtension(c.env.SESSIONS.getByName(key), "outbox", "list", {
        status: status as DeliveryStatus | undefined,
        limit,
      }),
    );
    // `truncated`: the listing reached its byte budget (docs/limits.md) before `limit` rows.
    return c.json({ sessionKey: key, count: deliveries.length, deliveries, ...(truncated ? { truncated: true } : {}) });
  });

  app.post("/v1/sessions/:key/deliveries/:id/retry", async (c) => {
    const key = targetOf(c).canonicalKey;
    const delivery = await rpc(callExtension(c.env.SESSIONS.getByName(key), "outbox", "retry", c.req.param("id")));
    if (!delivery) throw notFound(`Delivery not found: ${c.req.param("id")}`);
    return c.json(delivery);
  });
}

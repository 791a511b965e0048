import type { Hono } from "hono";
import { invalid, notFound } from "../errors";
import type { DeliveryStatus } from "../channels/outbox";
import { callExtension } from "../session/session-object";
import type { AppEnv } from "./app";
import { rpc, targetOf } from "./route-helpers";

const STATUSES: readonly DeliveryStatus[] = ["pending", "delivered", "blocked", "dead"];

/**
 * The outbox over REST (DESIGN §4 "Delivery"): what a session sent or tried to send, with dead
 * letters visible and re-queueable.
 *   GET  /v1/sessions/{key}/deliveries?status=pending|delivered|blocked|dead&limit=
 *   POST /v1/sessions/{key}/deliveries/{id}/retry
 */
export function deliveriesRoutes(app: Hono<AppEnv>): void {
  const target = (c: import("hono").Context<AppEnv>) => targetOf(c).canonicalKey;


  app.get("/v1/sessions/:key/deliveries", async (c) => {
    const key = target(c);
    const status = c.req.query("status");
    if (status !== undefined && !(STATUSES as readonly string[]).includes(status)) throw invalid(`status: expected one of ${STATUSES.join(", ")}`);
    const rawLimit = c.req.query("limit");
    if (rawLimit !== undefined && !/^\d+$/.test(rawLimit)) throw invalid("limit: expected an integer");
    const limit = Math.min(500, Math.max(1, Number(rawLimit ?? 100)));
    const deliveries = await rpc(callExtension(c.env.SESSIONS.getByName(key), "outbox", "list", { status: status as DeliveryStatus | undefined, limit }));
    return c.json({ sessionKey: key, count: deliveries.length, deliveries });
  });

  app.post("/v1/sessions/:key/deliveries/:id/retry", async (c) => {
    const key = target(c);
    const delivery = await rpc(callExtension(c.env.SESSIONS.getByName(key), "outbox", "retry", c.req.param("id")));
    if (!delivery) throw notFound(`Delivery not found: ${c.req.param("id")}`);
    return c.json(delivery);
  });
}

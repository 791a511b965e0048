import type { Hono } from "hono";
import { invalid, notFound, SwitchboardError } from "../errors";
import { callExtension } from "../session/session-object";
import type { AppEnv } from "./app-env";
import { intParam, rpc, targetOf } from "./route-helpers";

/**
 * Timers that gave up after their attempts (docs/timers.md), beside the dead deliveries:
 *   GET  /v1/sessions/{key}/timers/dead?limit=
 *   POST /v1/sessions/{key}/timers/dead/{kind}/{ref}/retry
 */
export function deadTimersRoutes(app: Hono<AppEnv>): void {
  app.get("/v1/sessions/:key/timers/dead", async (c) => {
    const key = targetOf(c).canonicalKey;
    const limit = intParam(c, "limit", { min: 1, max: 100, def: 100 })!;
    const timers = await rpc(callExtension(c.env.SESSIONS.getByName(key), "dead-timers", "list", { limit }));
    return c.json({ sessionKey: key, count: timers.length, timers });
  });

  app.post("/v1/sessions/:key/timers/dead/:kind/:ref/retry", async (c) => {
    const key = targetOf(c).canonicalKey;
    const kind = c.req.param("kind");
    const ref = c.req.param("ref");
    if (kind.length > 64) throw invalid("kind: at most 64 characters");
    if (ref.length > 512) throw invalid("ref: at most 512 characters");
    const r = await rpc(callExtension(c.env.SESSIONS.getByName(key), "dead-timers", "retry", { kind, ref }));
    if (!r) throw notFound(`Dead timer not found: ${kind}/${ref}`);
    if (!r.retried)
      throw new SwitchboardError(
        "conflict",
        `Timer ${kind}/${ref} ended its flow when it died and cannot be retried; start the work again instead.`,
      );
    return c.json({ ...r.timer, retried: true });
  });
}

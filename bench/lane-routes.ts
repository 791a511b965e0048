import { type Context, Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { forbidden } from "../src/errors";
import type { AppEnv } from "../src/http/app-env";
import { valid } from "../src/http/validate";
import { agentLaneName, type LaneCaller } from "../src/lane/subagent-lane";

/**
 * Spawn admission through the sub-agent lanes (bench/lane.mjs, docs/subagent-lane.md): `agents` agents at
 * once, each admitting `spawns` children one after another (acquire, then release, as a child whose task
 * ends at once), straight to the lane objects so the figure is the lane's own cost per spawn.
 * `gatewayMax` null: per-agent lanes only; a number: the lanes and the slot bank.
 */
const laneBody = z.object({
  agents: z.number().int().min(1).max(100),
  /** Per agent; agents × spawns × 2 lane calls stay within a request's subrequest budget (1,000). */
  spawns: z.number().int().min(1).max(50),
  gatewayMax: z.number().int().min(1).max(1_000).nullable(),
  /** Distinct agent ids per run, so every run starts from empty lanes. */
  tag: z.string().min(1).max(40),
});

export const laneBenchRoutes = new Hono<AppEnv>().post(
  "/v1/_bench/lane",
  describeRoute({ hide: true }),
  valid("json", laneBody),
  async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    if (body.agents * body.spawns * 2 > 1_000) throw forbidden("agents × spawns × 2 must stay within 1,000 calls");
    const perSpawn: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: body.agents }, async (_, a) => {
        const caller: LaneCaller = { agentId: `bench-${body.tag}-${a}`, gatewayMax: body.gatewayMax };
        const lane = c.env.SUBAGENT_LANE.getByName(agentLaneName(caller.agentId));
        for (let i = 0; i < body.spawns; i++) {
          const child = `agent:${caller.agentId}:subagent:b${i}`;
          const t0 = performance.now();
          const answer = await lane.acquire(child, caller);
          if (!answer.granted) throw new Error(`bench child ${child} was not granted a slot`);
          await lane.release(child, caller);
          perSpawn.push(performance.now() - t0);
        }
      }),
    );
    return c.json({ spawns: perSpawn.length, wallMs: performance.now() - started, perSpawnMs: perSpawn });
  },
);

function requireOperator(c: Context<AppEnv>): void {
  if (c.get("principal").role !== "operator") throw forbidden("Bench routes need the operator token");
}

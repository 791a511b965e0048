import { DurableObject } from "cloudflare:workers";
import { log } from "../log";
import { runMigrations } from "../migrations";
import { LANE_OBJECT, LANE_SCHEMA, type LaneAnswer, STALE_CHECKS, SubagentLane } from "./subagent-lane";

const MIGRATIONS = [
  LANE_SCHEMA,
  // Set once the rows of the registry's legacy lane instance were taken over (or there were none).
  "CREATE TABLE lane_adopted (done INTEGER NOT NULL)",
];

/**
 * The sub-agent lane's object (docs/subagent-lane.md): one instance, `LANE_OBJECT` of the SUBAGENT_LANE
 * namespace, limits how many sub-agent task runs run at once across the gateway. Its children call it
 * from their side of the lane (src/spawn/subagent-lane-client.ts); the rows and their transitions are
 * src/lane/subagent-lane.ts.
 */
export class SubagentLaneObject extends DurableObject<Env> {
  private readonly lane: SubagentLane;
  /** The take-over of the legacy lane's rows, once per instance (and once for good when it succeeded). */
  private adopting: Promise<void> | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.lane = new SubagentLane(ctx.storage.sql, ctx.storage);
    ctx.blockConcurrencyWhile(async () => runMigrations(ctx.storage.sql, MIGRATIONS));
  }

  /** Ask for a slot for `childKey`: granted now, or queued behind the children that asked before it. */
  async acquire(childKey: string, max: number): Promise<LaneAnswer> {
    await this.adoptLegacyLane();
    const answer = this.lane.acquire(childKey, max);
    if (answer.granted || answer.running < max) return answer;
    // Full: a slot may belong to a child that was deleted mid-task. Ask the oldest holders; drop the gone.
    for (const held of this.lane.oldRunning(STALE_CHECKS)) {
      const meta = await this.env.SESSIONS.getByName(held)
        .getMeta()
        .catch(() => undefined);
      if (meta === null || (meta && meta.subagent?.lane !== "running")) this.lane.reap(held, max);
    }
    return this.lane.acquire(childKey, max);
  }

  /** The child's task run ended (or it was deleted while waiting): its place is freed; returns the children granted a slot by it. */
  async release(childKey: string, max: number): Promise<string[]> {
    await this.adoptLegacyLane();
    return this.lane.release(childKey, max);
  }

  /**
   * Before this class existed the lane lived in the registry-class instance of the same name: a deployment
   * that upgrades with sub-agent tasks running or waiting hands their rows over here before the first
   * call, so the limit and the order hold across the upgrade. A failed hand-over is tried again at the
   * next call; meanwhile the lane serves from its own rows (children poll, so none waits forever).
   */
  private adoptLegacyLane(): Promise<void> {
    const sql = this.ctx.storage.sql;
    if (sql.exec("SELECT 1 FROM lane_adopted").toArray().length > 0) return Promise.resolve();
    const legacy = this.env.REGISTRY.getByName(LANE_OBJECT);
    this.adopting ??= legacy
      .legacyLaneRows()
      .then(async (rows) => {
        this.ctx.storage.transactionSync(() => {
          this.lane.adopt(rows);
          sql.exec("INSERT INTO lane_adopted (done) VALUES (1)");
        });
        // Only after the rows are ours: a lost drop leaves a table nothing reads again.
        if (rows.length > 0) await legacy.dropLegacyLane().catch(() => {});
      })
      .catch((err) => {
        log.warn("subagent_lane_adopt_failed", { error: err });
        this.adopting = null;
      });
    return this.adopting;
  }
}

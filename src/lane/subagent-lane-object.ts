import { DurableObject } from "cloudflare:workers";
import { log } from "../log";
import { runMigrations } from "../migrations";
import { callExtension } from "../session/extensions";
import { BANK_OBJECT, BANK_TABLES, type BankView, SlotBank } from "./slot-bank";
import {
  AgentLane,
  agentLaneName,
  LANE_SCHEMA,
  LANE_TABLES,
  type LaneAnswer,
  type LaneCaller,
  STALE_CHECK_MS,
  STALE_CHECKS,
} from "./subagent-lane";

const MIGRATIONS = [
  LANE_SCHEMA,
  // From the gateway-wide lane's upgrade from the registry class; nothing reads it any more.
  "CREATE TABLE lane_adopted (done INTEGER NOT NULL)",
  LANE_TABLES,
  BANK_TABLES,
];

/** Alarm rounds that retry telling granted children / giving leases back before the lane waits for its next call. */
const RETRY_ROUNDS = 8;
const RETRY_BASE_MS = 2_000;

/**
 * The sub-agent lane's object class (docs/subagent-lane.md). Two kinds of instance, by name:
 * - `agentLaneName(agentId)`: one agent's lane (src/lane/subagent-lane.ts). Its children call it from their
 *   side (src/spawn/subagent-lane-client.ts); it calls a child's session when it grants it a slot, so a
 *   waiting child is started by the release that freed the slot, not by polling.
 * - `BANK_OBJECT`: the gateway-wide lease count when `maxConcurrent` is set (src/lane/slot-bank.ts). Agent
 *   lanes call it for leases; it calls an agent's lane when a returned lease is granted to it.
 * Everything either waits for is a row (untold grants, leases on their way back, untold leases) that the
 * object's alarm retries, so an eviction between two calls loses nothing.
 */
export class SubagentLaneObject extends DurableObject<Env> {
  private readonly lane: AgentLane;
  private readonly bank: SlotBank;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.lane = new AgentLane(ctx.storage.sql);
    this.bank = new SlotBank(ctx.storage.sql);
    ctx.blockConcurrencyWhile(async () => runMigrations(ctx.storage.sql, MIGRATIONS));
  }

  // ---- an agent's lane ----

  /** Ask for a slot for `childKey`: granted now, or queued behind this agent's earlier children. */
  async acquire(childKey: string, caller: LaneCaller): Promise<LaneAnswer> {
    const first = this.tx(() => {
      this.remember(caller);
      return this.lane.enqueue(childKey, caller.gatewayMax);
    });
    if (first.answer.granted) {
      await this.settle(caller);
      return first.answer;
    }
    await this.reapStale(caller);
    await this.settle(caller, false, childKey);
    // A lease the bank granted while this call waited may have gone to this very child (told by this answer).
    return this.tx(() => this.lane.enqueue(childKey, caller.gatewayMax).answer);
  }

  /** The child's task run ended (or it was aborted waiting, or deleted): its place goes to the next waiter, who is told now. */
  async release(childKey: string, caller: LaneCaller): Promise<void> {
    this.tx(() => {
      this.remember(caller);
      this.lane.remove(childKey, caller.gatewayMax);
    });
    await this.settle(caller);
  }

  /** The bank granted this agent a lease that another agent gave back. Returns how many more it wants. */
  async leased(view: BankView): Promise<number> {
    const caller = this.caller();
    if (!caller) return 0;
    this.tx(() => this.applyView(view, caller));
    await this.settle(caller);
    return this.tx(() => this.wanted(caller));
  }

  /** Rows of this lane (tests, docs/subagent-lane.md): running and waiting children, bank leases held. */
  async snapshot(): Promise<{ running: number; waiting: number; leases: number }> {
    return {
      running: this.lane.count("running"),
      waiting: this.lane.count("waiting"),
      leases: this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM lane_leases").one().n,
    };
  }

  // ---- the bank ----

  /** An agent's lane gives back leases and says how many it wants; it gets all its leases back as the answer. */
  async exchange(agent: string, returning: string[], want: number, max: number): Promise<BankView> {
    const { view, others } = this.tx(() => this.bank.exchange(agent, returning, want, max));
    // Release-driven: the agents a returned lease went to are told now (retried by the alarm if not).
    await Promise.all(others.map((a) => this.push(a)));
    await this.armBank();
    return view;
  }

  /** Leases held per agent (tests). */
  async held(): Promise<Record<string, number>> {
    return this.bank.held();
  }

  async alarm(): Promise<void> {
    if (this.ctx.storage.sql.exec("SELECT 1 FROM bank_leases LIMIT 1").toArray().length > 0) {
      await Promise.all(this.bank.untold(Date.now()).map((a) => this.push(a)));
      await this.armBank();
    }
    const caller = this.caller();
    if (caller) {
      // Idle leases past their term go back (promote gives them back; it may also bind them to a waiter).
      this.tx(() => this.lane.promote(caller.gatewayMax));
      await this.reapStale(caller);
      await this.settle(caller, true);
    }
  }

  // ---- the lane's moves ----

  /**
   * After a transaction of this lane: give leases back and ask for the ones its waiters need (gateway mode),
   * then tell every granted child that has not heard yet. Failures stay rows for the alarm.
   */
  private async settle(caller: LaneCaller, fromAlarm = false, asking?: string): Promise<void> {
    const max = caller.gatewayMax;
    if (max !== null) {
      const returns = this.lane.returns().map((r) => r.id);
      const want = this.wanted(caller);
      const sent = Number(this.lane.setting("want_sent") ?? 0);
      if (returns.length > 0 || want > sent || (fromAlarm && want > 0)) {
        try {
          const view = await this.env.SUBAGENT_LANE.getByName(BANK_OBJECT).exchange(caller.agentId, returns, want, max);
          this.tx(() => {
            this.lane.returned(returns);
            this.applyView(view, caller);
          });
        } catch (err) {
          log.warn("subagent_lane_bank_failed", { agentId: caller.agentId, error: err });
          this.tx(() => this.lane.returnFailed(returns));
        }
      }
    }
    const untold = this.lane.untold().filter((k) => k !== asking);
    await Promise.all(
      untold.map((key) =>
        callExtension(this.env.SESSIONS.getByName(key), "subagent-lane", "granted")
          .then(() => this.tx(() => this.lane.told(key)))
          .catch((err) => log.warn("subagent_lane_notify_failed", { sessionKey: key, error: err })),
      ),
    );
    await this.armLane(fromAlarm);
  }

  /** A held slot whose child no longer runs its task (deleted, or its release lost) is taken back. */
  private async reapStale(caller: LaneCaller): Promise<void> {
    if (this.lane.count("waiting") === 0) return;
    const stale = this.tx(() => this.lane.staleRunning(STALE_CHECKS));
    for (const key of stale) {
      const meta = await this.env.SESSIONS.getByName(key)
        .getMeta()
        .catch(() => undefined);
      // A child still `waiting` on its side asks again (its timer); only a gone or released one is reaped.
      if (meta === null || (meta && (!meta.subagent || meta.subagent.lane === "released")))
        this.tx(() => this.lane.remove(key, caller.gatewayMax, true));
    }
  }

  private applyView(view: BankView, caller: LaneCaller): void {
    if (view.version <= Number(this.lane.setting("bank_version") ?? 0)) return;
    this.lane.setSetting("bank_version", String(view.version));
    this.lane.setSetting("want_sent", String(view.want));
    this.lane.setSetting("contended", view.contended ? "1" : "0");
    this.lane.applyLeases(view.leases);
    this.lane.promote(caller.gatewayMax);
  }

  /** Leases this agent needs: one per waiter, never more than the gateway has. */
  private wanted(caller: LaneCaller): number {
    return caller.gatewayMax === null ? 0 : Math.min(this.lane.want(), caller.gatewayMax);
  }

  /**
   * The lane's alarm: while it has work it could not finish (an untold child, a lease not given back) it retries
   * with backoff for RETRY_ROUNDS rounds; while children wait it checks its holders every STALE_CHECK_MS; an idle
   * lease goes back to the bank when its term ends.
   */
  private async armLane(fromAlarm: boolean): Promise<void> {
    const pending = this.lane.untold().length > 0 || this.lane.returns().length > 0;
    const rounds = pending ? (fromAlarm ? Number(this.lane.setting("retry_rounds") ?? 0) + 1 : 0) : 0;
    this.tx(() => this.lane.setSetting("retry_rounds", String(rounds)));
    let due: number | null = null;
    if (pending && rounds < RETRY_ROUNDS) due = Date.now() + RETRY_BASE_MS * 2 ** rounds;
    if (this.lane.count("waiting") > 0) due = Math.min(due ?? Infinity, Date.now() + STALE_CHECK_MS);
    const idle = this.lane.idleLeaseDue();
    if (idle !== null) due = Math.min(due ?? Infinity, idle);
    await this.setEarliest(due);
  }

  private async armBank(): Promise<void> {
    await this.setEarliest(this.bank.nextPushAt());
  }

  private async setEarliest(due: number | null): Promise<void> {
    if (due === null) return;
    const at = Math.max(due, Date.now());
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at || current < Date.now()) await this.ctx.storage.setAlarm(at);
  }

  /** Tell an agent's lane its new leases; it answers with how many it still wants. */
  private async push(agent: string): Promise<void> {
    const view = this.tx(() => this.bank.view(agent));
    try {
      const want = await this.env.SUBAGENT_LANE.getByName(agentLaneName(agent)).leased(view);
      this.tx(() => this.bank.told(agent, want));
    } catch (err) {
      log.warn("subagent_lane_bank_push_failed", { agentId: agent, error: err });
      this.tx(() => this.bank.pushFailed(agent));
    }
  }

  private remember(caller: LaneCaller): void {
    this.lane.setSetting("caller", JSON.stringify(caller));
  }

  private caller(): LaneCaller | null {
    const raw = this.lane.setting("caller");
    return raw ? (JSON.parse(raw) as LaneCaller) : null;
  }

  private tx<T>(fn: () => T): T {
    return this.ctx.storage.transactionSync(fn);
  }
}

import { agentLaneName, type LaneCaller } from "../lane/subagent-lane";
import { PUMP_TIMER } from "../session/core-timers";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import { reportTaskSync } from "../tasks/task-report";

/**
 * The child's side of the sub-agent lane (src/lane/subagent-lane-object.ts, docs/subagent-lane.md): its task
 * run stays queued until its requester agent's lane grants it a slot, and the slot is given back when the
 * task run ends.
 *
 *   spawn                → `lane: "waiting"`; the queue holds the task run; ask the lane now
 *   granted              → `lane: "running"`; the queue starts the task (its deadline starts now)
 *   not yet              → wait: the lane calls `granted` when a release frees a slot for this child; a
 *                          backstop ask after LANE_BACKSTOP_MS covers a lane that could not reach it
 *   task run ends        → `lane: "released"` + `subagent-lane:release` timer (run-ending transaction)
 *   release acknowledged → the lane itself has told its next waiter (and retries on its alarm)
 */

export const LANE_TIMER = "subagent-lane";
const ACQUIRE = "acquire";
const RELEASE = "release";
/**
 * A waiting child asks again this often. Not how it starts (the lane calls it when a slot frees): the bound
 * on how long a lane that could not reach it for all its retries (docs/subagent-lane.md) delays it.
 */
export const LANE_BACKSTOP_MS = 10 * 60_000;
const EXT = "subagent-lane" as const;

/** Whose lane: the agent of the session that spawned the child (its token is what could flood a lane). */
function laneCaller(host: SessionHost): LaneCaller {
  const requester = host.meta?.subagent?.requesterKey ?? host.key;
  const agentId = requester.startsWith("agent:") ? requester.split(":")[1] : host.cfg.agents.defaultId;
  return { agentId, gatewayMax: host.cfg.agents.defaults.subagents.maxConcurrent ?? null };
}

function laneStub(host: SessionHost, caller: LaneCaller) {
  return host.bindings.SUBAGENT_LANE.getByName(agentLaneName(caller.agentId));
}

/** Asks in flight per instance: every kick of a held queue would otherwise ask again. */
const asking = new WeakSet<SessionHost>();

/** Ask the lane for this child's slot. A throw leaves the acquire timer for the alarm to retry (timer-policy.ts). */
async function acquire(host: SessionHost): Promise<void> {
  if (host.meta?.subagent?.lane !== "waiting" || asking.has(host)) return;
  asking.add(host);
  try {
    let answer: Awaited<ReturnType<ReturnType<typeof laneStub>["acquire"]>>;
    try {
      const caller = laneCaller(host);
      answer = await laneStub(host, caller).acquire(host.key, caller);
    } catch (err) {
      // The acquire timer is still there: make sure the alarm is set for it.
      await host.timers.arm();
      throw err;
    }
    host.storage.transactionSync(() => {
      const sub = host.meta?.subagent;
      if (sub?.lane !== "waiting") return;
      if (answer.granted) {
        sub.lane = "running";
        host.saveMeta();
        // Granted its lane slot, the task runs: `queued` → `running` in the requester's ledger (docs/tasks.md).
        reportTaskSync(host, { status: "running" });
        host.timers.clear(LANE_TIMER, ACQUIRE);
      } else {
        host.timers.set(LANE_TIMER, ACQUIRE, Date.now() + LANE_BACKSTOP_MS);
      }
    });
    await host.timers.arm();
    if (answer.granted) host.kick();
  } finally {
    asking.delete(host);
  }
}

/** Releases in flight per instance: the run's end and this object's alarm (woken by another due timer, such as
 * the task ledger's report) may both start one; the second joins the first instead of releasing again. */
const releasing = new WeakMap<SessionHost, Promise<void>>();

function release(host: SessionHost): Promise<void> {
  const inFlight = releasing.get(host);
  if (inFlight) return inFlight;
  const done = (async () => {
    const caller = laneCaller(host);
    // The lane tells the next waiter itself, before this returns (and retries on its own alarm).
    await laneStub(host, caller).release(host.key, caller);
    host.timers.clear(LANE_TIMER, RELEASE);
    await host.timers.arm();
  })().finally(() => releasing.delete(host));
  releasing.set(host, done);
  return done;
}

/** Ask the lane and start if granted: right after the spawn (sessions_spawn), and when the lane says it is our turn. */
async function ask(host: SessionHost): Promise<{ ok: true }> {
  if (host.hasStorage) await acquire(host);
  return { ok: true };
}

const laneRpc = { ask, granted: ask };

declare module "../session/extensions" {
  interface ExtensionRpc {
    "subagent-lane": typeof laneRpc;
  }
}

/** The child's side of the sub-agent lane: its task run waits for a slot, and gives it back when it ends. */
export const subagentLaneExtension: SessionExtension = {
  name: EXT,
  rpc: laneRpc,
  holdsQueuedRun(host, run) {
    if (run.kind !== "subagent_task" || host.meta?.subagent?.lane !== "waiting") return false;
    // Inside the queue's claim transaction: the ask is a timer due now, made by this object's alarm (the queue
    // arms it when it stops), so it runs in this object's own context and survives an eviction.
    if (!host.timers.get(LANE_TIMER, ACQUIRE)) host.timers.set(LANE_TIMER, ACQUIRE, Date.now());
    return true;
  },
  onRunEnded(host, { input }) {
    const sub = host.meta?.subagent;
    if (input.kind !== "subagent_task" || !sub || (sub.lane !== "running" && sub.lane !== "waiting")) return;
    // A task aborted while waiting gives back its place in the queue; a finished one its slot.
    sub.lane = "released";
    host.saveMeta();
    host.timers.clear(LANE_TIMER, ACQUIRE);
    host.timers.set(LANE_TIMER, RELEASE, Date.now());
  },
  afterRunEnded: async (host) => {
    if (host.timers.get(LANE_TIMER, RELEASE)) await release(host);
  },
  timers: {
    // The lane unreachable for all its attempts: run the task anyway (over the limit, visibly as a dead timer) rather
    // than never. A release that keeps failing would leak a slot, so it is tried for longer (about 2 h) before it is dead.
    [LANE_TIMER]: {
      policy: { maxAttempts: 14, maxDelayMs: 10 * 60_000 },
      onDead: (host, dead) => {
        const sub = host.meta?.subagent;
        if (dead.ref !== ACQUIRE || sub?.lane !== "waiting") return;
        sub.lane = "running";
        host.saveMeta();
        host.timers.set(PUMP_TIMER, "queue", Date.now());
      },
    },
  },
  async onTimer(host, timer) {
    if (timer.ref === ACQUIRE) await acquire(host);
    else await release(host);
  },
};

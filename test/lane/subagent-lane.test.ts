import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { BANK_OBJECT } from "../../src/lane/slot-bank";
import {
  AGENT_LANE_LIMIT,
  agentLaneName,
  LEASE_TERM_MS,
  MAX_AGENT_WAITING,
  STALE_CHECK_MS,
} from "../../src/lane/subagent-lane";
import { SubagentLaneObject } from "../../src/lane/subagent-lane-object";
import { SessionObject } from "../../src/session/session-object";
import { LANE_BACKSTOP_MS } from "../../src/spawn/subagent-lane-client";
import { call, enc, invoke } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import { installFakes, until } from "../helpers/scripted";
import { subagentConfig } from "../helpers/subagents";

/**
 * Task runs held open until the test finishes them; the order they reached the model in. The run polls a
 * plain set the test writes: a promise resolved from the test's context would continue the run there.
 */
function heldTasks() {
  const finished = new Set<string>();
  const started: string[] = [];
  installFakes(async (r) => {
    if (!r.lastUser.includes("[Subagent Task]")) return ""; // announce steps: no notes
    started.push(r.session);
    while (!finished.has(r.session)) await new Promise((resolve) => setTimeout(resolve, 5));
    return `done ${r.session}`;
  });
  return { started, finish: (key: string) => finished.add(key) };
}

/** Each test's agents have their own lanes (the lanes and the bank outlive a test within this file). */
function agentsConfig(agents: string[], subagents: Record<string, unknown>) {
  return subagentConfig({
    list: [{ id: "main", default: true }, ...agents.map((id) => ({ id }))],
    subagents: { maxChildrenPerAgent: 20, ...subagents },
  });
}

/** A requester session of `agent` (a made-up one: any session of the agent's token can spawn). */
const requester = (agent: string) => `agent:${agent}:webchat:direct:r-${crypto.randomUUID().slice(0, 8)}`;

async function spawn(req: string, tasks: string[]) {
  const kids: { key: string; runId: string }[] = [];
  for (const task of tasks) {
    const r = await invoke("sessions_spawn", { task }, { sessionKey: req });
    expect(r.details.status).toBe("accepted");
    kids.push({ key: r.details.childSessionKey, runId: r.details.runId });
  }
  return kids;
}

/** The lane's first "your turn" call to a child fails (`failed` counts it); later ones go through. */
function failFirstGrant(message: string): { failed: number } {
  const grants = { failed: 0 };
  const realCall = SessionObject.prototype.extensionCall;
  vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
    this: SessionObject,
    name,
    method,
    arg,
  ) {
    if (name === "subagent-lane" && method === "granted" && grants.failed === 0) {
      grants.failed++;
      return Promise.reject(new Error(message));
    }
    return realCall.call(this, name, method, arg);
  });
  return grants;
}

const statusOf = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json.status;
const laneOf = (agent: string) => env.SUBAGENT_LANE.getByName(agentLaneName(agent));
const bank = () => env.SUBAGENT_LANE.getByName(BANK_OBJECT);

/** The agents' idle leases reach the end of their term: their lanes' alarms give them back to the bank. */
async function leasesReturned(...agents: string[]): Promise<void> {
  for (const a of agents) {
    await runInDurableObject(laneOf(a), async (_o, state) => {
      state.storage.sql.exec("UPDATE lane_leases SET granted_at = granted_at - ?", LEASE_TERM_MS + 1);
    });
    await runDurableObjectAlarm(laneOf(a));
  }
  const held = await bank().held();
  for (const a of agents) expect(held[a]).toBeUndefined();
}

/** When the child's own alarm would next ask the lane (its backstop), from now. */
async function childBackstopIn(key: string): Promise<number> {
  return runInDurableObject(env.SESSIONS.getByName(key), async (_o, state) => {
    const due = state.storage.sql
      .exec<{ due_at: number }>("SELECT due_at FROM timers WHERE kind = 'subagent-lane' AND ref = 'acquire'")
      .one().due_at;
    return due - Date.now();
  });
}

describe("sub-agent lane: one lane per agent, woken by releases", () => {
  it("maxConcurrent 1 (set: gateway-wide): tasks start one at a time in spawn order, each started by the release before it", async () => {
    setConfigOverride(agentsConfig(["l1"], { maxConcurrent: 1 }));
    const { started, finish } = heldTasks();
    const kids = await spawn(requester("l1"), ["one", "two", "three"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["running", "queued", "queued"]);
    // A waiting child does not poll: its only own ask is the backstop, minutes away.
    expect(await childBackstopIn(kids[1].key)).toBeGreaterThan(LANE_BACKSTOP_MS - 60_000);

    // No alarm runs below: each release calls the next waiter.
    finish(kids[0].key);
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["ok", "running", "queued"]);
    finish(kids[1].key);
    await until(async () => expect(started).toEqual(kids.map((k) => k.key)));
    finish(kids[2].key);
    await until(async () => expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["ok", "ok", "ok"]));
    // The lane keeps its lease idle for the agent's next spawn until the term ends; then it goes back.
    expect(await bank().held()).toEqual(expect.objectContaining({ l1: 1 }));
    await leasesReturned("l1");
  });

  it("maxConcurrent 2 runs two at once; aborting a waiting task gives its place to the next", async () => {
    setConfigOverride(agentsConfig(["l2"], { maxConcurrent: 2 }));
    const { started, finish } = heldTasks();
    const kids = await spawn(requester("l2"), ["a", "b", "c", "d"]);
    await until(async () => expect([...started].sort()).toEqual([kids[0].key, kids[1].key].sort()));
    expect((await call("POST", `/v1/runs/${kids[2].runId}/abort`)).json.status).toBe("aborted");
    finish(kids[0].key);
    // The aborted child's place went to the one behind it.
    await until(async () => expect(started).toContain(kids[3].key));
    expect(started).not.toContain(kids[2].key);
    finish(kids[1].key);
    finish(kids[3].key);
    await until(async () =>
      expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["ok", "ok", "aborted", "ok"]),
    );
  });

  it("maxConcurrent not set: each agent runs AGENT_LANE_LIMIT at once in its own lane; another agent is not held up", async () => {
    setConfigOverride(agentsConfig(["busy", "calm"], { maxConcurrent: undefined }));
    const { started, finish } = heldTasks();
    const busy = await spawn(
      requester("busy"),
      Array.from({ length: AGENT_LANE_LIMIT + 2 }, (_, i) => `t${i}`),
    );
    await until(async () => expect(started.length).toBe(AGENT_LANE_LIMIT));
    expect(await laneOf("busy").snapshot()).toEqual({ running: AGENT_LANE_LIMIT, waiting: 2, leases: 0 });
    const [calm] = await spawn(requester("calm"), ["mine"]);
    await until(async () => expect(started).toContain(calm.key));
    // No bank is involved without a gateway-wide maxConcurrent.
    const held = await bank().held();
    expect([held.busy, held.calm]).toEqual([undefined, undefined]);
    for (const k of [...busy, calm]) finish(k.key);
    await until(async () =>
      expect(new Set(await Promise.all([...busy, calm].map((k) => statusOf(k.runId))))).toEqual(new Set(["ok"])),
    );
  });

  it("fairness: an agent flooding spawns from made-up requester sessions does not delay another agent's child past the next release", async () => {
    setConfigOverride(agentsConfig(["flood", "fair"], { maxConcurrent: 2 }));
    const { started, finish } = heldTasks();
    const flood: { key: string; runId: string }[] = [];
    for (let i = 0; i < 3; i++) flood.push(...(await spawn(requester("flood"), ["f1", "f2", "f3", "f4"])));
    await until(async () => expect(started.length).toBe(2));
    expect(await laneOf("flood").snapshot()).toEqual({ running: 2, waiting: 10, leases: 2 });
    const [fair] = await spawn(requester("fair"), ["my turn"]);
    expect(await statusOf(fair.runId)).toBe("queued");
    // The flood's ten waiters are one bank row wanting at most maxConcurrent leases, not ten entries.
    const wants = await runInDurableObject(bank(), async (_o, state) =>
      state.storage.sql
        .exec<{ agent: string; want: number }>("SELECT agent, want FROM bank_agents ORDER BY agent")
        .toArray(),
    );
    expect(wants).toEqual([
      { agent: "fair", want: 1 },
      { agent: "flood", want: 2 },
    ]);

    // The first flood child to finish gives its lease to the other agent, ahead of the flood's own queue.
    finish(started[0]);
    await until(async () => expect(started[2]).toBe(fair.key));
    expect(await bank().held()).toEqual({ flood: 1, fair: 1 });
    // The rest of the flood drains (two at a time, so two granted together may reach the model in either order).
    for (;;) {
      for (const k of started) finish(k);
      const n = started.length;
      if (n === flood.length + 1) break;
      await until(async () => expect(started.length).toBeGreaterThan(n));
    }
    expect(started.filter((k) => k !== fair.key).sort()).toEqual(flood.map((k) => k.key).sort());
    await until(async () =>
      expect(await Promise.all([...flood, fair].map((k) => statusOf(k.runId)))).toEqual(Array(13).fill("ok")),
    );
    await leasesReturned("flood", "fair");
  });

  it("maxConcurrent set: an agent spawning one child after another keeps its lease; the bank sees one take per term, not one per spawn", async () => {
    const lane = laneOf("steady");
    const caller = { agentId: "steady", gatewayMax: 10 };
    const exchange = vi.spyOn(SubagentLaneObject.prototype, "exchange");
    for (let i = 0; i < 5; i++) {
      const child = `agent:steady:subagent:c${i}`;
      expect((await lane.acquire(child, caller)).granted).toBe(true);
      await lane.release(child, caller);
    }
    expect(exchange).toHaveBeenCalledTimes(1);
    expect(await lane.snapshot()).toEqual({ running: 0, waiting: 0, leases: 1 });
    await leasesReturned("steady");
    expect(exchange).toHaveBeenCalledTimes(2);
    expect(await lane.snapshot()).toEqual({ running: 0, waiting: 0, leases: 0 });
  });

  it("one agent's lane keeps at most MAX_AGENT_WAITING waiters; past it a child is not queued (and asks on its backstop)", async () => {
    const lane = laneOf("bounded");
    const caller = { agentId: "bounded", gatewayMax: null };
    await lane.snapshot();
    await runInDurableObject(lane, async (_o, state) => {
      for (let i = 0; i < AGENT_LANE_LIMIT; i++)
        state.storage.sql.exec(
          "INSERT INTO lane_slots (child_key, state, seq, updated_at) VALUES (?, 'running', ?, ?)",
          `agent:bounded:subagent:run-${i}`,
          i + 1,
          Date.now(),
        );
      for (let i = 0; i < MAX_AGENT_WAITING - 1; i++)
        state.storage.sql.exec(
          "INSERT INTO lane_slots (child_key, state, seq, updated_at) VALUES (?, 'waiting', ?, ?)",
          `agent:bounded:subagent:wait-${i}`,
          AGENT_LANE_LIMIT + i + 1,
          Date.now(),
        );
    });
    expect(await lane.acquire("agent:bounded:subagent:last", caller)).toEqual({
      granted: false,
      queued: true,
      running: AGENT_LANE_LIMIT,
      waiting: MAX_AGENT_WAITING,
    });
    expect((await lane.acquire("agent:bounded:subagent:over", caller)).queued).toBe(false);
  });

  it("a lost 'your turn' call is made again by the lane's alarm", async () => {
    setConfigOverride(agentsConfig(["lost"], { maxConcurrent: 1 }));
    const { started, finish } = heldTasks();
    const grants = failFirstGrant("message lost");
    const kids = await spawn(requester("lost"), ["first", "second"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    finish(kids[0].key);
    await until(async () => expect(grants.failed).toBe(1));
    expect(await statusOf(kids[1].runId)).toBe("queued");
    // The grant is a row of the lane: its alarm (retry due in seconds, not the child's backstop) tells the child.
    expect(await runDurableObjectAlarm(laneOf("lost"))).toBe(true);
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    finish(kids[1].key);
    await until(async () => expect(await statusOf(kids[1].runId)).toBe("ok"));
  });

  it("a child deleted mid-task gives its slot back: while others wait, the lane's alarm checks its old holders", async () => {
    setConfigOverride(agentsConfig(["del"], { maxConcurrent: 1 }));
    const { started, finish } = heldTasks();
    const kids = await spawn(requester("del"), ["doomed", "next"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    expect((await call("DELETE", `/v1/sessions/${enc(kids[0].key)}`)).status).toBe(200);
    finish(kids[0].key); // ends the deleted run's model call
    await runInDurableObject(laneOf("del"), async (_o, state) => {
      state.storage.sql.exec("UPDATE lane_slots SET updated_at = updated_at - ?", 2 * STALE_CHECK_MS);
    });
    await runDurableObjectAlarm(laneOf("del"));
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    finish(kids[1].key);
    await until(async () => expect(await statusOf(kids[1].runId)).toBe("ok"));
  });

  it("the bank is evicted with a push owed, then the lane crashes between recording a grant and telling the child: nothing is lost", async () => {
    setConfigOverride(agentsConfig(["ev1", "ev2"], { maxConcurrent: 1 }));
    const { started, finish } = heldTasks();
    const [a] = await spawn(requester("ev1"), ["holder"]);
    await until(async () => expect(started).toEqual([a.key]));
    const [b] = await spawn(requester("ev2"), ["waiter"]);
    // The bank's push to ev2's lane fails once: ev2 is owed a lease, as a row of the bank.
    const realLeased = SubagentLaneObject.prototype.leased;
    let refused = 0;
    vi.spyOn(SubagentLaneObject.prototype, "leased").mockImplementation(function (this: SubagentLaneObject, view) {
      if (refused++ === 0) return Promise.reject(new Error("lane unreachable"));
      return realLeased.call(this, view);
    });
    // …and ev2's lane cannot reach its child the first time: the grant is only a row of the lane.
    const grants = failFirstGrant("child unreachable");
    finish(a.key);
    await until(async () => expect(await statusOf(a.runId)).toBe("ok"));
    await until(async () => expect(refused).toBe(1));
    expect(await bank().held()).toEqual({ ev2: 1 });
    await evict(bank());
    // Nothing of the bank's memory survived: its alarm finds the owed push in its rows.
    await runDurableObjectAlarm(bank());
    await until(async () => expect(grants.failed).toBe(1));
    expect(await laneOf("ev2").snapshot()).toEqual({ running: 1, waiting: 0, leases: 1 });
    expect(started).toEqual([a.key]);
    await crash(laneOf("ev2"));
    // The lane's alarm finds the untold grant in its rows and tells the child.
    await runDurableObjectAlarm(laneOf("ev2"));
    await until(async () => expect(started).toEqual([a.key, b.key]));
    finish(b.key);
    await until(async () => expect(await statusOf(b.runId)).toBe("ok"));
    await leasesReturned("ev1", "ev2");
  });
});

import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { LANE_OBJECT, LANE_SCHEMA, STALE_CHECK_MS } from "../../src/lane/subagent-lane";
import { SessionObject } from "../../src/session/session-object";
import { LANE_POLL_MS } from "../../src/spawn/subagent-lane-client";
import { advance, call, enc, invoke } from "../helpers/http";
import { installFakes, until } from "../helpers/scripted";
import { requesterKey, subagentConfig } from "../helpers/subagents";

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

async function spawn(req: string, tasks: string[]) {
  const kids: { key: string; runId: string }[] = [];
  for (const task of tasks) {
    const r = await invoke("sessions_spawn", { task }, { sessionKey: req });
    expect(r.details.status).toBe("accepted");
    kids.push({ key: r.details.childSessionKey, runId: r.details.runId });
  }
  return kids;
}

const statusOf = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json.status;

describe("sub-agent lane (agents.defaults.subagents.maxConcurrent)", () => {
  it("maxConcurrent 1: later children's tasks stay queued and start one at a time, in spawn order, as slots free", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxConcurrent: 1 } }));
    const { started, finish } = heldTasks();
    const req = requesterKey("lane");
    const kids = await spawn(req, ["one", "two", "three"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["running", "queued", "queued"]);
    // Waiting children poll the lane on their alarm: still no slot while the first holds it.
    await advance(kids[1].key, LANE_POLL_MS);
    await advance(kids[2].key, LANE_POLL_MS);
    expect(started).toEqual([kids[0].key]);

    finish(kids[0].key);
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["ok", "running", "queued"]);
    finish(kids[1].key);
    await until(async () => expect(started).toEqual(kids.map((k) => k.key)));
    finish(kids[2].key);
    await until(async () => expect(await Promise.all(kids.map((k) => statusOf(k.runId)))).toEqual(["ok", "ok", "ok"]));
  });

  it("maxConcurrent 2 runs two at once; aborting a waiting task gives its place to the next", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxConcurrent: 2, maxChildrenPerAgent: 10 } }));
    const { started, finish } = heldTasks();
    const req = requesterKey("lane2");
    const kids = await spawn(req, ["a", "b", "c", "d"]);
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

  it("a lost 'your turn' message only delays the waiter until its next poll of the lane", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxConcurrent: 1 } }));
    const { started, finish } = heldTasks();
    const realCall = SessionObject.prototype.extensionCall;
    let lost = 0;
    vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
      this: SessionObject,
      name,
      method,
      arg,
    ) {
      if (name === "subagent-lane" && method === "granted") {
        lost++;
        return Promise.reject(new Error("message lost"));
      }
      return realCall.call(this, name, method, arg);
    });
    const kids = await spawn(requesterKey("lane-lost"), ["first", "second"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    finish(kids[0].key);
    await until(async () => expect(await statusOf(kids[0].runId)).toBe("ok"));
    await until(async () => expect(lost).toBe(1));
    expect(await statusOf(kids[1].runId)).toBe("queued");
    await advance(kids[1].key, LANE_POLL_MS);
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    finish(kids[1].key);
    await until(async () => expect(await statusOf(kids[1].runId)).toBe("ok"));
  });

  it("a child deleted mid-task gives its slot back: a full lane checks its oldest holders and drops the gone", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxConcurrent: 1 } }));
    const { started, finish } = heldTasks();
    const kids = await spawn(requesterKey("lane-del"), ["doomed", "next"]);
    await until(async () => expect(started).toEqual([kids[0].key]));
    expect((await call("DELETE", `/v1/sessions/${enc(kids[0].key)}`)).status).toBe(200);
    finish(kids[0].key); // ends the deleted run's model call
    // Still full on the next poll while the slot is young; once older than STALE_CHECK_MS its holder is checked.
    await advance(kids[1].key, LANE_POLL_MS);
    expect(started).toEqual([kids[0].key]);
    await runInDurableObject(env.SUBAGENT_LANE.getByName(LANE_OBJECT), async (_o, state) => {
      state.storage.sql.exec("UPDATE lane_slots SET updated_at = updated_at - ?", 2 * STALE_CHECK_MS);
    });
    await advance(kids[1].key, LANE_POLL_MS);
    await until(async () => expect(started).toEqual([kids[0].key, kids[1].key]));
    finish(kids[1].key);
    await until(async () => expect(await statusOf(kids[1].runId)).toBe("ok"));
  });

  it("an upgrade hands the lane rows of the registry's former lane instance to the lane object: a slot held there still counts", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxConcurrent: 1 } }));
    const holder = "agent:main:subagent:held-before-upgrade";
    // Before the lane had its own class, the registry-class instance of the same name held its rows.
    const legacy = env.REGISTRY.getByName(LANE_OBJECT);
    await runInDurableObject(legacy, async (_o, state) => {
      state.storage.sql.exec(LANE_SCHEMA);
      state.storage.sql.exec(
        "INSERT INTO lane_slots (child_key, state, seq, updated_at) VALUES (?, 'running', 1, ?)",
        holder,
        Date.now(),
      );
    });
    // A lane object that has not taken anything over yet (as on the first call after the upgrade).
    const lane = env.SUBAGENT_LANE.getByName(LANE_OBJECT);
    await runInDurableObject(lane, async (_o, state) => {
      state.storage.sql.exec("DELETE FROM lane_adopted");
      state.storage.sql.exec("DELETE FROM lane_slots");
    });
    await evictDurableObject(lane);

    const { started, finish } = heldTasks();
    const [kid] = await spawn(requesterKey("lane-upgrade"), ["after the upgrade"]);
    await advance(kid.key, LANE_POLL_MS);
    expect(started).toEqual([]);
    expect(await statusOf(kid.runId)).toBe("queued");
    expect(await legacy.legacyLaneRows()).toEqual([]);

    // The holder's task ends: its release reaches the lane object, and the waiting child starts.
    expect(await lane.release(holder, 1)).toEqual([kid.key]);
    await advance(kid.key, LANE_POLL_MS);
    await until(async () => expect(started).toEqual([kid.key]));
    finish(kid.key);
    await until(async () => expect(await statusOf(kid.runId)).toBe("ok"));
  });
});

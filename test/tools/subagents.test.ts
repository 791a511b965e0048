import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { newTaskId } from "../../src/tasks/task-id";
import { invoke, sessionStub } from "../helpers/http";
import {
  announcesIn,
  childState,
  installFakes,
  type ModelCall,
  releaseAndSettleChildren,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";
import { ledgerOf, spawn } from "../helpers/tasks";

/**
 * `subagents` (src/tools/subagents.ts; docs/tasks.md): list and cancel with OpenClaw's parameters, result shapes
 * and texts. The wait: test/tools/subagents-wait.test.ts; a cascade across three levels with evictions:
 * test/tasks/cancel-cascade.test.ts.
 */

afterEach(releaseAndSettleChildren);

/** Children whose task mentions "slow" hang until aborted; the others answer at once. */
function fakes() {
  setConfigOverride(subagentConfig());
  return installFakes((c: ModelCall) =>
    c.step === "task" ? (c.lastUser.includes("slow") ? "hang" : "done: 42") : c.step === "announce" ? "" : "ok",
  );
}

const list = (req: string, args: Record<string, unknown> = {}) => invoke("subagents", args, { sessionKey: req });

describe("subagents list", () => {
  it("lists the caller's children with their task rows, run views and text", async () => {
    fakes();
    const req = requesterKey("list");
    const fast = await spawn(req, { task: "compute the answer", label: "calc" });
    const slow = await spawn(req, { task: "slow survey of the field" });
    await settle(fast.childSessionKey);
    // The slow child's "running" report is a timer due now: its alarm sends it.
    await runDurableObjectAlarm(sessionStub(slow.childSessionKey));
    const r = await list(req);
    expect(r.status).toBe(200);
    const d = r.details;
    expect(Object.keys(d)).toEqual([
      "status",
      "action",
      "requesterSessionKey",
      "callerSessionKey",
      "callerIsSubagent",
      "total",
      "taskTotal",
      "tasks",
      "active",
      "recent",
      "text",
    ]);
    expect(d).toMatchObject({
      status: "ok",
      action: "list",
      requesterSessionKey: req,
      callerSessionKey: req,
      callerIsSubagent: false,
      total: 2,
      taskTotal: 2,
    });
    const byId = Object.fromEntries(d.tasks.map((t: any) => [t.taskId, t]));
    expect(byId[fast.taskId]).toEqual({
      taskId: fast.taskId,
      runtime: "subagent",
      deliveryStatus: "delivered",
      execution: { state: "finished", lastActivityAt: expect.any(Number) },
      status: "completed",
      label: "calc",
      terminalSummary: "done: 42",
      terminalOutcome: "succeeded",
    });
    expect(byId[slow.taskId]).toMatchObject({ runtime: "subagent", status: "running", deliveryStatus: "pending" });
    expect(Object.keys(d.active[0])).toEqual([
      "index",
      "runId",
      "sessionKey",
      "label",
      "task",
      "status",
      "execution",
      "deliveryStatus",
      "pendingDescendants",
      "runtime",
      "runtimeMs",
      "model",
      "totalTokens",
      "startedAt",
    ]);
    expect(d.active).toHaveLength(1);
    expect(d.active[0]).toMatchObject({
      index: 1,
      runId: slow.runId,
      sessionKey: slow.childSessionKey,
      label: "slow survey of the field",
      status: "running",
      pendingDescendants: 0,
      model: "fake/m1",
    });
    expect(d.recent).toHaveLength(1);
    expect(d.recent[0]).toMatchObject({ index: 2, sessionKey: fast.childSessionKey, label: "calc", status: "done" });
    expect(d.text).toMatch(
      /^active subagents:\n1\. slow survey of the field \(fake\/m1, \d+s\) running\n\nrecent \(last 30m\):\n2\. calc \(fake\/m1, \d+s, tokens 1\.2k\) done - compute the answer$/,
    );
  });

  it("a session without children lists nothing; unknown actions and bad parameters are refused with OpenClaw's texts", async () => {
    fakes();
    const req = requesterKey("empty");
    const r = await list(req, { action: "list" });
    expect(r.details).toMatchObject({ total: 0, taskTotal: 0, tasks: [], active: [], recent: [] });
    expect(r.details.text).toBe("active subagents:\n(none)\n\nrecent (last 30m):\n(none)");
    expect((await list(req, { action: "steer" })).details).toEqual({ status: "error", error: "Unsupported action." });
    expect((await list(req, { recentMinutes: 0 })).status).toBe(400);
    expect((await list(req, { recentMinutes: 1.5 })).status).toBe(400);
    expect((await list(req, { target: "x" })).body.error.message).toBe("target: unknown parameter for subagents");
    // Above the cap is accepted and capped (snake_case spelling too).
    expect((await list(req, { recent_minutes: 5000 })).details.text).toContain("recent (last 1440m):");
  });

  it("shows a task that ended within recentMinutes, and not one that ended before", async () => {
    fakes();
    const req = requesterKey("recent");
    const done = await spawn(req, { task: "quick job" });
    await settle(done.childSessionKey);
    await runInDurableObject(sessionStub(req), (_obj, state) => {
      const ago = 45 * 60_000;
      state.storage.sql.exec("UPDATE tasks SET updated_at = updated_at - ?, ended_at = ended_at - ?", ago, ago);
    });
    expect((await list(req)).details).toMatchObject({ taskTotal: 0, recent: [] });
    const wide = (await list(req, { recentMinutes: 60 })).details;
    expect(wide.taskTotal).toBe(1);
    expect(wide.recent[0]).toMatchObject({ sessionKey: done.childSessionKey, status: "done" });
    expect(wide.text).toContain("recent (last 60m):\n1. quick job (fake/m1, ");
  });

  it("lists the children of children, and a parent with open descendants as waiting on them", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 2 } }));
    let spawned = false;
    installFakes((c: ModelCall) => {
      if (c.step === "announce") return "";
      if (c.lastUser.includes("[Subagent Task]: orchestrate")) {
        if (spawned) return "orchestrated";
        spawned = true;
        return { toolCall: { name: "sessions_spawn", args: { task: "slow grandchild work", label: "gc" } } };
      }
      return c.step === "task" ? "hang" : "ok";
    });
    const req = requesterKey("tree");
    const parent = await spawn(req, { task: "orchestrate" });
    expect((await sessionStub(parent.childSessionKey).waitRun(parent.runId, 10_000))?.status).toBe("ok");
    const grandchild = (await childState(parent.childSessionKey)).flows
      .filter((f) => f.id.startsWith("child:"))
      .map((f) => f.id.slice("child:".length))[0];
    for (const key of [parent.childSessionKey, grandchild]) await runDurableObjectAlarm(sessionStub(key));
    const d = (await list(req)).details;
    expect(d).toMatchObject({ total: 2, taskTotal: 2 });
    const gcTask = (await ledgerOf(parent.childSessionKey))[0];
    expect(d.tasks.map((t: any) => [t.taskId, t.status]).sort()).toEqual(
      [
        [parent.taskId, "completed"],
        [gcTask.taskId, "running"],
      ].sort(),
    );
    const views = [...d.active].map((v: any) => [v.sessionKey, v.status, v.pendingDescendants]);
    expect(views).toContainEqual([parent.childSessionKey, "done (waiting on 1 child)", 1]);
    expect(views).toContainEqual([grandchild, "running", 0]);
    // A sub-agent lists its own children, and says it is one.
    const own = (await list(parent.childSessionKey)).details;
    expect(own).toMatchObject({ callerIsSubagent: true, taskTotal: 1, total: 1 });
  });
});

describe("subagents cancel", () => {
  it("cancels a running child: its run is aborted, its task cancelled, its parent told once", async () => {
    const fake = fakes();
    const req = requesterKey("cancel");
    const slow = await spawn(req, { task: "slow crawl", label: "crawler" });
    const r = await list(req, { action: "cancel", taskId: slow.taskId });
    expect(r.details).toEqual({ status: "cancelled", taskId: slow.taskId, found: true, cancelled: true });
    // Success is reported after the child's run settled.
    expect((await sessionStub(slow.childSessionKey).getRun(slow.runId))?.status).toBe("aborted");
    const child = await settle(slow.childSessionKey);
    expect(child.meta.subagent).toMatchObject({ status: "killed", cancelled: { reason: "Cancelled by operator." } });
    await runDurableObjectAlarm(sessionStub(req));
    expect(await ledgerOf(req)).toMatchObject([
      { taskId: slow.taskId, status: "cancelled", error: "Cancelled by operator.", deliveryStatus: "delivered" },
    ]);
    const told = await announcesIn(req, slow.childSessionKey);
    expect(told).toHaveLength(1);
    expect(told[0].text).toContain("cancelled: Cancelled by operator.");
    // No announce step ran a model turn for a cancelled child.
    expect(fake.model.filter((c) => c.step === "announce")).toEqual([]);
    expect((await list(req)).details.recent[0]).toMatchObject({ sessionKey: slow.childSessionKey, status: "killed" });
    expect((await list(req, { action: "cancel", taskId: slow.taskId })).details).toEqual({
      status: "error",
      taskId: slow.taskId,
      found: true,
      cancelled: false,
      reason: "Task is already terminal.",
    });
  });

  it("refuses tasks outside the caller's tree, unknown ids and a missing taskId", async () => {
    fakes();
    const a = requesterKey("cancel-a");
    const b = requesterKey("cancel-b");
    const other = await spawn(b, { task: "slow other" });
    expect((await list(a, { action: "cancel", taskId: other.taskId })).details).toEqual({
      status: "forbidden",
      error: "Task outside session tree.",
    });
    expect((await list(a, { action: "cancel", taskId: "not-a-task" })).details).toEqual({
      status: "forbidden",
      error: "Task outside session tree.",
    });
    // Ids of the caller's own ledger that it does not hold: not found.
    await spawn(a, { task: "slow mine" });
    const unknown = newTaskId(a);
    expect((await list(a, { action: "cancel", taskId: unknown })).details).toEqual({
      status: "error",
      taskId: unknown,
      found: false,
      cancelled: false,
      reason: "Task not found.",
    });
    const missing = await list(a, { action: "cancel" });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toBe("taskId required");
    // The other requester's child still runs.
    expect((await sessionStub(other.childSessionKey).getRun(other.runId))?.status).not.toBe("aborted");
  });

  it("a leaf sub-agent cannot cancel other sessions' tasks; orchestrators keep the tool, leaves lose it", async () => {
    setConfigOverride(subagentConfig({ tools: { subagents: { tools: { allow: ["subagents"] } } } }));
    installFakes((c: ModelCall) => (c.step === "task" ? "hang" : "ok"));
    const req = requesterKey("leaf");
    const child = await spawn(req, { task: "slow leaf" });
    expect((await list(child.childSessionKey, { action: "cancel", taskId: child.taskId })).details).toEqual({
      status: "forbidden",
      error: "Leaf subagents cannot cancel other sessions.",
    });
    // Without the allow, a leaf (depth 1 of 1) is not offered the tool at all.
    setConfigOverride(subagentConfig());
    const denied = await list(child.childSessionKey);
    expect(denied.status).toBe(404);
    expect(denied.body.error.message).toBe("Tool not available for this session: subagents");
    // An orchestrator (depth 1 of 2) has it.
    setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 2 } }));
    expect((await list(child.childSessionKey)).details.status).toBe("ok");
    await list(req, { action: "cancel", taskId: child.taskId });
  });
});

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { callExtension } from "../../src/session/extensions";
import { getFlowRow } from "../../src/session/flow-rows";
import type { SessionObject } from "../../src/session/session-object";
import { YIELD_WAIT_MAX_MS } from "../../src/spawn/yield-batch";
import { YIELD_TASK_LABEL } from "../../src/spawn/yield-task";
import { TASK_LOST_AFTER_MS } from "../../src/tasks/task-audit";
import { YIELD_BATCH_GONE } from "../../src/tasks/task-backing";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { releaseAndQuiesce, settle } from "../helpers/subagents";
import { age } from "../helpers/tasks";
import { batchesOf, childrenOf, resumeRuns, start, taskOf, yieldingAnswers } from "../helpers/yield";

/**
 * Every `sessions_yield` is a task of the yielding session's ledger (src/spawn/yield-task.ts, docs/tasks.md):
 * `running` from the claim, `succeeded` when the session resumes, `timed_out` when a child never reported,
 * visible at GET /v1/sessions/{key}/tasks — with every object crashed between the steps.
 */

afterEach(releaseAndQuiesce);

async function tasksOf(key: string): Promise<any[]> {
  const r = await call("GET", `/v1/sessions/${enc(key)}/tasks?recentMinutes=60`);
  expect(r.status).toBe(200);
  expect(r.json.sessionKey).toBe(key);
  return r.json.tasks;
}
const yieldTasks = async (key: string) => (await tasksOf(key)).filter((t) => t.runtime === "yield");

/** Crash every object of the tree, then let each one's alarm run what is due (as a restart does). */
async function crashAll(keys: string[]): Promise<void> {
  await crash(...keys.map(sessionStub));
  for (const k of keys) await runDurableObjectAlarm(sessionStub(k));
}

describe("a yield is a ledger task", () => {
  it("running from the claim → succeeded on resume, once, across crashes between every step", async () => {
    const { req } = await start(2);
    const kids = await childrenOf(req);
    const [batch] = await batchesOf(req);
    const expectedTask = (yielded: any) => ({
      taskId: batch.data.taskId,
      runtime: "yield",
      requesterSessionKey: req,
      ownerKey: req,
      scopeKind: "session",
      runId: batch.data.runId,
      label: YIELD_TASK_LABEL,
      task: `Resume this session once its 2 sub-agents ended: part 1 (${kids[0]}), part 2 (${kids[1]})`,
      deliveryStatus: "not_applicable",
      notifyPolicy: "silent",
      createdAt: expect.any(Number),
      startedAt: expect.any(Number),
      lastEventAt: expect.any(Number),
      ...yielded,
    });
    expect(await yieldTasks(req)).toEqual([expectedTask({ status: "running" })]);
    await crashAll([req, ...kids]);
    expect(await yieldTasks(req)).toEqual([expectedTask({ status: "running" })]);

    // The first child ends: still waiting.
    await settle(kids[0]);
    await crashAll([req, ...kids]);
    expect((await yieldTasks(req)).map((t) => t.status)).toEqual(["running"]);

    // The second: the batch settles and the resume turn is queued — the task ends in that transaction.
    await settle(kids[1]);
    await crashAll([req, ...kids]);
    await runDurableObjectAlarm(sessionStub(req));
    const resumes = await resumeRuns(req);
    expect(resumes).toHaveLength(1);
    await sessionStub(req).waitRun(resumes[0].id, 10_000);
    await crashAll([req, ...kids]);
    const [done] = await yieldTasks(req);
    expect(done).toEqual(
      expectedTask({
        status: "succeeded",
        terminalSummary: `All 2 sub-agents ended; resumed in run ${resumes[0].id}.`,
        terminalOutcome: "succeeded",
        endedAt: expect.any(Number),
        cleanupAfter: done.endedAt + 7 * 24 * 60 * 60_000,
      }),
    );
    // Nothing repeated: one yield task, one resume run; the children's own tasks are beside it.
    expect(await resumeRuns(req)).toHaveLength(1);
    const all = await tasksOf(req);
    expect(all.map((t) => t.runtime).sort()).toEqual(["subagent", "subagent", "yield"]);
    // The model's listing (subagents, also over MCP) shows the task in its words.
    const listed = await invoke("subagents", { action: "list" }, { sessionKey: req });
    expect(listed.details.tasks.filter((t: any) => t.runtime === "yield")).toEqual([
      {
        taskId: batch.data.taskId,
        runtime: "yield",
        deliveryStatus: "not_applicable",
        execution: { state: "finished", lastActivityAt: expect.any(Number) },
        status: "completed",
        label: YIELD_TASK_LABEL,
        terminalSummary: `All 2 sub-agents ended; resumed in run ${resumes[0].id}.`,
        terminalOutcome: "succeeded",
      },
    ]);
  });

  it("a child that never reports: timed_out when the bounded wait ends, naming it; a late success changes nothing", async () => {
    const { req } = await start(
      2,
      yieldingAnswers(2, (c) => (taskOf(c) === "part 2" ? "hang" : `result of ${taskOf(c)}`)),
    );
    const [first, second] = await childrenOf(req);
    await settle(first);
    await crashAll([req, first]);
    expect((await yieldTasks(req)).map((t) => t.status)).toEqual(["running"]);

    await advance(req, YIELD_WAIT_MAX_MS);
    await runDurableObjectAlarm(sessionStub(req));
    const resumes = await resumeRuns(req);
    expect(resumes).toHaveLength(1);
    await crashAll([req]);
    const [task] = await yieldTasks(req);
    expect(task).toMatchObject({
      status: "timed_out",
      error: `The wait ended without a report from 1 of 2 sub-agents: ${second}. Resumed in run ${resumes[0].id}.`,
      endedAt: expect.any(Number),
    });
    expect(task.terminalSummary).toBeUndefined();

    // A late, weaker report (the straggler's end reaching the ledger) never overwrites the terminal state.
    const late = await callExtension(sessionStub(req), "task-ledger", "report", {
      taskId: task.taskId,
      update: { status: "succeeded", terminalSummary: "late" },
    });
    expect(late).toEqual({ applied: true, refused: true });
    expect(await yieldTasks(req)).toEqual([task]);
    await sessionStub(req).waitRun(resumes[0].id, 10_000);
  });

  it("the audit: stale while its wait runs past 30 minutes; lost when its batch is gone", async () => {
    const { req } = await start(
      1,
      yieldingAnswers(1, () => "hang"),
    );
    const [task] = await yieldTasks(req);
    await age(req, 31 * 60_000);
    const audit = await call("GET", `/v1/sessions/${enc(req)}/tasks/audit`);
    expect(audit.json.findings).toContainEqual({
      code: "stale_running",
      severity: "error",
      taskId: task.taskId,
      status: "running",
      detail: "Running for more than 30 minutes",
    });
    // The batch row disappears (storage damaged, a row removed by hand): the sweep finds nothing backs the task.
    await runInDurableObject(sessionStub(req), (_o: SessionObject, state) => {
      const id = `yield:${task.runId}`;
      expect(getFlowRow(state.storage.sql, id)).not.toBeNull();
      state.storage.sql.exec("DELETE FROM flows WHERE id = ?", id);
    });
    await age(req, TASK_LOST_AFTER_MS);
    const [lost] = await yieldTasks(req);
    expect(lost).toMatchObject({ status: "lost", error: YIELD_BATCH_GONE });
    const after = await call("GET", `/v1/sessions/${enc(req)}/tasks/audit`);
    expect(after.json.findings).toContainEqual({
      code: "lost",
      severity: "warn",
      taskId: task.taskId,
      status: "lost",
      detail: YIELD_BATCH_GONE,
    });
  });
});

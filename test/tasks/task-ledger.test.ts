import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import { SessionObject } from "../../src/session/session-object";
import { createTask, updateTask } from "../../src/tasks/task-api";
import { BACKING_GONE } from "../../src/tasks/task-audit";
import { newTaskId, ownerKeyOfTask } from "../../src/tasks/task-id";
import { MAX_TASKS_PER_SESSION } from "../../src/tasks/task-store";
import { LOST_TASK_RETENTION_MS, TASK_RETENTION_MS, type TaskInit } from "../../src/tasks/task-types";
import { advance, call, enc, sessionStub } from "../helpers/http";
import { childState, installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";
import { age, ledgerNotes, ledgerOf, spawn } from "../helpers/tasks";

/**
 * The task ledger's rules (src/tasks/; docs/tasks.md), driven through the owner's RPC — as a child's reports
 * reach it — and through the in-object API other runtimes use. Time moves by `advance` (timers), never sleeps.
 */

const ownerKey = () => `agent:main:ledger-${crypto.randomUUID().slice(0, 8)}`;

async function owner(): Promise<string> {
  const key = ownerKey();
  await sessionStub(key).ensureSession();
  return key;
}

function subagentTask(key: string, extra: Partial<TaskInit> = {}): TaskInit {
  return {
    runtime: "subagent",
    taskId: newTaskId(key),
    task: "survey",
    childSessionKey: `agent:main:subagent:${crypto.randomUUID()}`,
    ...extra,
  };
}

const record = (key: string, init: TaskInit) => callExtension(sessionStub(key), "task-ledger", "record", init);
const report = (key: string, taskId: string, update: Record<string, unknown>) =>
  callExtension(sessionStub(key), "task-ledger", "report", { taskId, update });

describe("task ids", () => {
  it("carry their owner's key, so a task routes to its ledger without a lookup", () => {
    const key = "agent:main:webchat:direct:alice";
    const id = newTaskId(key);
    expect(id).toMatch(/^[0-9a-f-]{36}\.[A-Za-z0-9_-]+$/);
    expect(ownerKeyOfTask(id)).toBe(key);
    expect(newTaskId(key)).not.toBe(id);
    expect(ownerKeyOfTask("not-a-task")).toBeNull();
  });
});

describe("the status rule", () => {
  it("moves only forward, and the first terminal state is final: a late success never overwrites cancelled", async () => {
    const key = await owner();
    const init = subagentTask(key);
    const t = await record(key, init);
    expect(t).toMatchObject({
      taskId: init.taskId,
      status: "queued",
      deliveryStatus: "pending",
      notifyPolicy: "done_only",
    });
    expect(await report(key, init.taskId!, { status: "running" })).toEqual({ applied: true, refused: false });
    expect(await report(key, init.taskId!, { status: "queued" })).toEqual({ applied: true, refused: false });
    expect((await ledgerOf(key))[0].status).toBe("running");
    await report(key, init.taskId!, { status: "cancelled", error: "Cancelled by operator." });
    // The child's run ends after the cancel was recorded: its success changes nothing.
    expect(await report(key, init.taskId!, { status: "succeeded", terminalSummary: "late" })).toEqual({
      applied: true,
      refused: true,
    });
    expect(await report(key, init.taskId!, { status: "lost", error: "gone" })).toMatchObject({ refused: true });
    expect((await ledgerOf(key))[0]).toMatchObject({ status: "cancelled", error: "Cancelled by operator." });
    // Delivery may still change after the end.
    await report(key, init.taskId!, { deliveryStatus: "delivered" });
    expect((await ledgerOf(key))[0]).toMatchObject({ status: "cancelled", deliveryStatus: "delivered" });
  });

  it("a late cancel never overwrites succeeded; a report before the task was recorded records it", async () => {
    const key = await owner();
    const init = subagentTask(key);
    const first = await callExtension(sessionStub(key), "task-ledger", "report", {
      taskId: init.taskId!,
      update: { status: "succeeded", terminalSummary: "all done" },
      init,
    });
    expect(first).toEqual({ applied: true, refused: false });
    expect(await report(key, init.taskId!, { status: "cancelled" })).toMatchObject({ refused: true });
    const [row] = await ledgerOf(key);
    expect(row).toMatchObject({ taskId: init.taskId, status: "succeeded", error: null });
    // recording it again (the spawn's own call arriving late) changes nothing.
    expect(await record(key, init)).toMatchObject({ status: "succeeded", terminalSummary: "all done" });
  });

  it("never creates a session to hold a ledger", async () => {
    const key = ownerKey();
    expect(await record(key, subagentTask(key))).toBeNull();
    expect(await report(key, newTaskId(key), { status: "running" })).toMatchObject({ applied: false, ownerGone: true });
    expect(await sessionStub(key).getMeta()).toBeNull();
  });
});

describe("notify policies (a runtime in the owner's object: the in-object API)", () => {
  it("done_only notes the end, state_changes every transition, silent nothing", async () => {
    const key = await owner();
    const ids = await runInDurableObject(sessionStub(key), (obj: SessionObject) =>
      obj.storage.transactionSync(() => {
        const mk = (notifyPolicy: "done_only" | "state_changes" | "silent", label: string) =>
          createTask(obj, { runtime: "yield", task: `wait (${label})`, label, notifyPolicy }).taskId;
        return {
          done: mk("done_only", "done-only"),
          changes: mk("state_changes", "changes"),
          silent: mk("silent", "quiet"),
        };
      }),
    );
    await runInDurableObject(sessionStub(key), (obj: SessionObject) =>
      obj.storage.transactionSync(() => {
        for (const id of Object.values(ids)) updateTask(obj, id, { status: "running" });
        updateTask(obj, ids.done, { status: "succeeded" });
        updateTask(obj, ids.changes, { status: "failed", error: "the children never reported" });
        updateTask(obj, ids.silent, { status: "succeeded" });
      }),
    );
    expect(await ledgerNotes(key)).toEqual([
      `[Task running] changes (task ${ids.changes})`,
      `[Task succeeded] done-only (task ${ids.done})`,
      `[Task failed] changes (task ${ids.changes}): the children never reported`,
    ]);
    const rows = Object.fromEntries((await ledgerOf(key)).map((r) => [r.taskId, r.deliveryStatus]));
    expect(rows).toEqual({ [ids.done]: "delivered", [ids.changes]: "delivered", [ids.silent]: "not_applicable" });
  });
});

describe("delivery", () => {
  it('a child spawned with cleanup "delete" leaves its task succeeded and delivered once it is gone', async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "the answer" : c.step === "announce" ? "" : "hi"));
    const req = requesterKey("ledger-delete");
    const t = await spawn(req, { task: "find it", cleanup: "delete" });
    const gone = await settle(t.childSessionKey);
    expect(gone.exists).toBe(false);
    const [task] = await callExtension(sessionStub(req), "task-ledger", "get", [t.taskId]);
    expect(task).toMatchObject({ status: "succeeded", deliveryStatus: "delivered", terminalSummary: "the answer" });
  });

  it("a succeeded task whose announce hand-off died is blocked (its result never arrived); an operator retry delivers it", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "the answer" : c.step === "announce" ? "" : "hi"));
    const req = requesterKey("ledger-blocked");
    await sessionStub(req).ensureSession();
    const realCall = SessionObject.prototype.extensionCall;
    let refuse = true;
    vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
      this: SessionObject,
      name,
      method,
      arg,
    ) {
      if (refuse && this.key === req && method === "receiveAnnounce")
        return Promise.reject(new Error("requester unreachable"));
      return realCall.call(this, name, method, arg);
    });
    const t = await spawn(req, { task: "find it" });
    const stub = sessionStub(t.childSessionKey);
    await stub.waitRun(t.runId, 10_000);
    for (let i = 0; i < 5 && !(await childState(t.childSessionKey)).flows.some((f) => f.state === "handoff"); i++) {
      for (const id of (await childState(t.childSessionKey)).pendingRuns) await stub.waitRun(id, 10_000);
      await runDurableObjectAlarm(stub);
    }
    // Until the hand-off dies (not further: the child would then be archived an hour later).
    const handoff = async () => (await childState(t.childSessionKey)).timers.some((x) => x.kind === "subagent-handoff");
    for (let pass = 0; pass < 12 && (await handoff()); pass++) await advance(t.childSessionKey, 20 * 60_000);
    await runDurableObjectAlarm(stub);
    const blocked = await callExtension(sessionStub(req), "task-ledger", "get", [t.taskId]);
    expect(blocked[0]).toMatchObject({ status: "succeeded", deliveryStatus: "failed", terminalOutcome: "blocked" });
    refuse = false;
    const retried = await call(
      "POST",
      `/v1/sessions/${enc(t.childSessionKey)}/timers/dead/subagent-handoff/${t.runId}/retry`,
    );
    expect(retried.status).toBe(200);
    await settle(t.childSessionKey);
    const delivered = await callExtension(sessionStub(req), "task-ledger", "get", [t.taskId]);
    expect(delivered[0]).toMatchObject({
      status: "succeeded",
      deliveryStatus: "delivered",
      terminalOutcome: "succeeded",
    });
  });
});

describe("over REST", () => {
  it("POST /v1/tasks/{taskId}/cancel cancels a running child as subagents cancel does; GET /v1/tasks/{taskId} shows it", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "hang" : "ok"));
    const req = requesterKey("ledger-rest");
    const t = await spawn(req, { task: "slow crawl" });
    const r = await call("POST", `/v1/tasks/${encodeURIComponent(t.taskId)}/cancel`);
    expect([r.status, r.json]).toEqual([200, { taskId: t.taskId, found: true, cancelled: true }]);
    expect((await sessionStub(t.childSessionKey).getRun(t.runId))?.status).toBe("aborted");
    // Once its announce is handed over, the task does not change any more.
    await settle(t.childSessionKey);
    await runDurableObjectAlarm(sessionStub(req));
    const shown = (await call("GET", `/v1/tasks/${encodeURIComponent(t.taskId)}`)).json;
    expect(shown).toMatchObject({
      taskId: t.taskId,
      status: "cancelled",
      error: "Cancelled by operator.",
      runtime: "subagent",
    });
    const listed = (await call("GET", `/v1/sessions/${enc(req)}/tasks`)).json;
    expect(listed).toEqual({ sessionKey: req, tasks: [shown] });
    expect(shown.deliveryStatus).toBe("delivered");
  });
});

describe("retention, sweep and audit", () => {
  it("forgets an ended task 7 days after it ended, a lost one after 24 h, from the task-prune timer", async () => {
    const key = await owner();
    const done = subagentTask(key);
    const lost = subagentTask(key);
    for (const t of [done, lost]) await record(key, t);
    await report(key, done.taskId!, { status: "succeeded" });
    await report(key, lost.taskId!, { status: "lost", error: "gone" });
    const rows = await ledgerOf(key);
    const byId = Object.fromEntries(rows.map((r) => [r.taskId, r]));
    expect(byId[done.taskId!].cleanupAfter).toBe(byId[done.taskId!].endedAt! + TASK_RETENTION_MS);
    expect(byId[lost.taskId!].cleanupAfter).toBe(byId[lost.taskId!].endedAt! + LOST_TASK_RETENTION_MS);
    await age(key, LOST_TASK_RETENTION_MS - 60_000);
    expect(await ledgerOf(key)).toHaveLength(2);
    await age(key, 60_000);
    expect((await ledgerOf(key)).map((r) => r.taskId)).toEqual([done.taskId]);
    await age(key, TASK_RETENTION_MS - LOST_TASK_RETENTION_MS);
    expect(await ledgerOf(key)).toEqual([]);
    const timers = await runInDurableObject(sessionStub(key), (_obj, state) =>
      state.storage.sql.exec("SELECT kind FROM timers WHERE kind LIKE 'task-%'").toArray(),
    );
    expect(timers).toEqual([]);
  });

  it("the sweep marks a task whose child session is gone lost, after 5 quiet minutes; the audit reports it", async () => {
    const key = await owner();
    const t = subagentTask(key);
    await record(key, t);
    await report(key, t.taskId!, { status: "running" });
    await age(key, 60_000);
    expect((await ledgerOf(key))[0].status).toBe("running");
    await age(key, 4 * 60_000);
    expect((await ledgerOf(key))[0]).toMatchObject({ status: "lost", error: BACKING_GONE });
    const audit = (await call("GET", `/v1/sessions/${enc(key)}/tasks/audit`)).json;
    expect(audit).toMatchObject({ sessionKey: key, openTasks: 0, truncated: false });
    expect(audit.findings).toEqual([
      { code: "lost", severity: "warn", taskId: t.taskId, status: "lost", detail: BACKING_GONE },
    ]);
  });

  it("the audit reports stale, undelivered, uncleaned and inconsistent tasks with OpenClaw's codes", async () => {
    const key = await owner();
    const [queued, running, failed, noCleanup, skewed] = Array.from({ length: 5 }, () => subagentTask(key));
    for (const t of [queued, running, failed, noCleanup, skewed]) await record(key, t);
    await report(key, running.taskId!, { status: "running" });
    for (const t of [failed, noCleanup, skewed]) await report(key, t.taskId!, { status: "succeeded" });
    await report(key, failed.taskId!, { deliveryStatus: "failed", terminalOutcome: "blocked" });
    await runInDurableObject(sessionStub(key), (_obj, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE tasks SET created_at = created_at - 11 * 60000 WHERE task_id = ?", queued.taskId!);
      sql.exec(
        "UPDATE tasks SET started_at = started_at - 31 * 60000, created_at = created_at - 31 * 60000 WHERE task_id = ?",
        running.taskId!,
      );
      sql.exec("UPDATE tasks SET cleanup_after = NULL WHERE task_id = ?", noCleanup.taskId!);
      sql.exec("UPDATE tasks SET ended_at = started_at - 1000 WHERE task_id = ?", skewed.taskId!);
    });
    const audit = (await call("GET", `/v1/sessions/${enc(key)}/tasks/audit`)).json;
    expect(audit.openTasks).toBe(2);
    expect(audit.findings.map((f: any) => [f.code, f.severity, f.taskId]).sort()).toEqual(
      [
        ["stale_queued", "warn", queued.taskId],
        ["stale_running", "error", running.taskId],
        ["delivery_failed", "warn", failed.taskId],
        ["missing_cleanup", "warn", noCleanup.taskId],
        ["inconsistent_timestamps", "warn", skewed.taskId],
      ].sort(),
    );
  });

  it(`keeps at most ${MAX_TASKS_PER_SESSION} tasks: the oldest ended go first, open ones stay`, async () => {
    const key = await owner();
    const open = await runInDurableObject(sessionStub(key), (obj: SessionObject) =>
      obj.storage.transactionSync(() => {
        const keep = createTask(obj, { runtime: "send", task: "still open" }).taskId;
        for (let i = 0; i < MAX_TASKS_PER_SESSION + 5; i++) {
          const id = createTask(obj, { runtime: "send", task: `t${i}`, notifyPolicy: "silent" }).taskId;
          updateTask(obj, id, { status: "succeeded" }, Date.now() + i);
        }
        return keep;
      }),
    );
    const rows = await ledgerOf(key);
    expect(rows).toHaveLength(MAX_TASKS_PER_SESSION);
    expect(rows.find((r) => r.taskId === open)?.status).toBe("queued");
    await runDurableObjectAlarm(sessionStub(key));
  });
});

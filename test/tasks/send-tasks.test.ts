import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import { newRunId } from "../../src/session/run-id";
import type { SessionObject } from "../../src/session/session-object";
import { SEND_RUN_GONE } from "../../src/tasks/task-backing";
import { newTaskId } from "../../src/tasks/task-id";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { baseConfig, deferred, doneFlow, installFakes, until } from "../helpers/scripted";
import { age, ledgerNotes } from "../helpers/tasks";

/**
 * A long `sessions_send` is a task of its requester's ledger (src/tasks/send-task.ts, docs/tasks.md): a
 * fire-and-forget send at once, a waited one once its wait expired while the run goes on; the task follows
 * the target's run to its end (ok → succeeded, error → failed, timeout → timed_out). A send answered within
 * its wait is no task. Objects crash between the steps; nothing is repeated or lost.
 */

let n = 0;
const uniq = (base: string) => `agent:main:${base}-${++n}-${crypto.randomUUID().slice(0, 6)}`;

async function tasksOf(key: string): Promise<any[]> {
  const r = await call("GET", `/v1/sessions/${enc(key)}/tasks?recentMinutes=60`);
  expect(r.status).toBe(200);
  expect(r.json.sessionKey).toBe(key);
  return r.json.tasks;
}

/** The target's pending ledger reports (task-report timer rows). */
async function pendingReports(key: string): Promise<number> {
  return runInDurableObject(
    sessionStub(key),
    (_obj: SessionObject, state) =>
      state.storage.sql.exec("SELECT 1 FROM timers WHERE kind = 'task-report'").toArray().length,
  );
}

/**
 * A send from `req` that does not wait (timeoutSeconds 0): accepted with a run id, answered once the target's
 * run holds the model.
 */
async function sendHeld(
  fakes: ReturnType<typeof installFakes>,
  req: string,
  target: string,
  message: string,
): Promise<string> {
  const r = await invoke("sessions_send", { sessionKey: target, message, timeoutSeconds: 0 }, { sessionKey: req });
  expect(r.details).toMatchObject({ status: "accepted", runId: expect.any(String) });
  await until(async () => expect(fakes.model.map((m) => m.kind)).toEqual(["primary"]));
  return r.details.runId;
}

/** A requester session and a target whose primary run's model answer is held until `release`. */
async function setup(extra: Record<string, any> = {}) {
  setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } }, channels: {}, ...extra }));
  const hold = deferred<string | Error>();
  const fakes = installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : hold.promise));
  const req = uniq("sreq");
  const target = uniq("stgt");
  await sessionStub(req).ensureSession();
  return { req, target, fakes, release: hold.resolve };
}

function sendTask(req: string, target: string, runId: string, message: string, extra: Record<string, unknown>) {
  return {
    taskId: expect.any(String),
    runtime: "send",
    requesterSessionKey: req,
    ownerKey: req,
    scopeKind: "session",
    targetSessionKey: target,
    agentId: "main",
    runId,
    label: `sessions_send to ${target}`,
    task: message,
    deliveryStatus: "not_applicable",
    notifyPolicy: "silent",
    createdAt: expect.any(Number),
    lastEventAt: expect.any(Number),
    ...extra,
  };
}

describe("a long sessions_send is a ledger task", () => {
  it("fire-and-forget: running while its run runs → succeeded with it; crashes between the steps repeat nothing", async () => {
    const { req, target, fakes, release } = await setup();
    const runId = await sendHeld(fakes, req, target, "index the docs");
    await runDurableObjectAlarm(sessionStub(target));
    const running = sendTask(req, target, runId, "index the docs", {
      status: "running",
      startedAt: expect.any(Number),
    });
    await until(async () => expect(await tasksOf(req)).toEqual([running]));
    // The requester is lost mid-run (the target's run is in flight there): the task stays as it was.
    await crash(sessionStub(req));
    await runDurableObjectAlarm(sessionStub(req));
    expect(await tasksOf(req)).toEqual([running]);

    release("the docs are indexed");
    await sessionStub(target).waitRun(runId, 10_000);
    await doneFlow(target);
    await crash(sessionStub(req), sessionStub(target));
    for (const k of [req, target]) await runDurableObjectAlarm(sessionStub(k));
    const [done] = await tasksOf(req);
    expect(done).toEqual(
      sendTask(req, target, runId, "index the docs", {
        status: "succeeded",
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        cleanupAfter: done.endedAt + 7 * 24 * 60 * 60_000,
        terminalSummary: "the docs are indexed",
        terminalOutcome: "succeeded",
        model: expect.any(String),
        totalTokens: expect.any(Number),
      }),
    );
    // silent: nothing was added to the requester's transcript; another round of crashes repeats nothing.
    expect(await ledgerNotes(req)).toEqual([]);
    await crash(sessionStub(req), sessionStub(target));
    for (const k of [req, target]) await runDurableObjectAlarm(sessionStub(k));
    expect(await ledgerNotes(req)).toEqual([]);
    expect(await tasksOf(req)).toEqual([done]);
    expect(await pendingReports(target)).toBe(0);
    // The model's listing (subagents, also over MCP) shows it too.
    const listed = await invoke("subagents", { action: "list" }, { sessionKey: req });
    expect(listed.details.tasks).toEqual([
      expect.objectContaining({ taskId: done.taskId, runtime: "send", status: "completed" }),
    ]);
  });

  it("a waited send whose wait expired: no task during the wait, running after it, failed with its run", async () => {
    const { req, target, fakes, release } = await setup();
    const sent = invoke(
      "sessions_send",
      { sessionKey: target, message: "long job", timeoutSeconds: 1 },
      {
        sessionKey: req,
      },
    );
    await until(async () => expect(fakes.model.map((m) => m.kind)).toEqual(["primary"]));
    // Within the wait, the caller still holds the send: no task.
    expect(await tasksOf(req)).toEqual([]);
    const r = await sent;
    expect(r.details).toMatchObject({ status: "timeout", runId: expect.any(String) });
    const runId: string = r.details.runId;
    await runDurableObjectAlarm(sessionStub(target));
    await until(async () =>
      expect(await tasksOf(req)).toEqual([
        sendTask(req, target, runId, "long job", { status: "running", startedAt: expect.any(Number) }),
      ]),
    );
    await crash(sessionStub(req));

    release(new Error("quota exceeded"));
    await sessionStub(target).waitRun(runId, 10_000);
    await doneFlow(target);
    await crash(sessionStub(req), sessionStub(target));
    for (const k of [req, target]) await runDurableObjectAlarm(sessionStub(k));
    const [failed] = await tasksOf(req);
    expect(failed).toMatchObject({ runId, status: "failed", deliveryStatus: "not_applicable" });
    expect(failed.error).toContain("quota exceeded");
    expect(await ledgerNotes(req)).toEqual([]);
  });

  it("a send answered within its wait is no task", async () => {
    const { req, target, release } = await setup();
    release("quick answer");
    const r = await invoke(
      "sessions_send",
      { sessionKey: target, message: "quick", timeoutSeconds: 10 },
      {
        sessionKey: req,
      },
    );
    expect(r.details).toMatchObject({ status: "ok", reply: "quick answer" });
    await doneFlow(target);
    await advance(target, 20_000);
    expect(await pendingReports(target)).toBe(0);
    expect(await tasksOf(req)).toEqual([]);
  });

  it("timed_out when its run reaches its deadline; the late model answer and a late success change nothing", async () => {
    const { req, target, fakes, release } = await setup({
      agents: { defaults: { model: "fake/m1", timeoutSeconds: 60 } },
    });
    const runId = await sendHeld(fakes, req, target, "slow");
    await advance(target, 61_000);
    expect(await sessionStub(target).waitRun(runId, 10_000)).toMatchObject({ status: "timeout" });
    await crash(sessionStub(req));
    await runDurableObjectAlarm(sessionStub(target));
    const [task] = await until(async () => {
      const t = await tasksOf(req);
      expect(t.map((x) => x.status)).toEqual(["timed_out"]);
      return t;
    });
    // The model answers after the deadline: the run's end is final, the task's too.
    release("too late");
    await doneFlow(target);
    const late = await callExtension(sessionStub(req), "task-ledger", "report", {
      taskId: task.taskId,
      update: { status: "succeeded", terminalSummary: "too late" },
    });
    expect(late).toEqual({ applied: true, refused: true });
    await runDurableObjectAlarm(sessionStub(target));
    expect(await tasksOf(req)).toEqual([task]);
  });

  it("a send into the requester's own session: its ledger records the task in place, once", async () => {
    const { req, fakes, release } = await setup();
    const runId = await sendHeld(fakes, req, req, "note to self");
    await runDurableObjectAlarm(sessionStub(req));
    await until(async () =>
      expect((await tasksOf(req)).map((t) => [t.status, t.targetSessionKey])).toEqual([["running", req]]),
    );
    release("noted");
    await sessionStub(req).waitRun(runId, 10_000);
    await doneFlow(req);
    await crash(sessionStub(req));
    await runDurableObjectAlarm(sessionStub(req));
    expect((await tasksOf(req)).map((t) => [t.runId, t.status, t.terminalSummary])).toEqual([
      [runId, "succeeded", "noted"],
    ]);
    expect(await pendingReports(req)).toBe(0);
  });

  it("lost: the sweep finds the run gone from its target; the audit reports it", async () => {
    setConfigOverride(baseConfig());
    const req = uniq("sreq");
    const target = uniq("stgt");
    await sessionStub(req).ensureSession();
    await sessionStub(target).ensureSession();
    const taskId = newTaskId(req);
    await callExtension(sessionStub(req), "task-ledger", "record", {
      runtime: "send",
      taskId,
      task: "never queued",
      runId: newRunId(target),
      status: "running",
    });
    await age(req, 5 * 60_000);
    expect((await tasksOf(req))[0]).toMatchObject({ taskId, status: "lost", error: SEND_RUN_GONE });
    const audit = await call("GET", `/v1/sessions/${enc(req)}/tasks/audit`);
    expect(audit.json.findings).toEqual([
      { code: "lost", severity: "warn", taskId, status: "lost", detail: SEND_RUN_GONE },
    ]);
  });
});

import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import type { SessionObject } from "../../src/session/session-object";
import { createTask, updateTask } from "../../src/tasks/task-api";
import { call, enc, invoke, sessionStub } from "../helpers/http";
import { openStream, type SseEvent, type SseReader } from "../helpers/sse";
import { installFakes, releaseAndSettleChildren, requesterKey, settle, subagentConfig } from "../helpers/subagents";
import { spawn } from "../helpers/tasks";

/**
 * The ledger on the owner's event stream (docs/events.md, `task`; src/tasks/task-events.ts): every change a
 * reader sees is a `task` event carrying the record `GET /v1/tasks/{id}` serves, written with the change, and
 * each status move is also a `task_changed` state change of `session_status changesSince` — for a sub-agent
 * and for any other runtime alike. What the console's Sub-agents tab follows live.
 */

afterEach(releaseAndSettleChildren);

const RANK: Record<string, number> = { queued: 0, running: 1 };
const rank = (s: string) => RANK[s] ?? 2;

/** Read `sse` until `done` holds for the task events seen (the stream replays what is retained, then goes live). */
async function taskEventsUntil(
  sse: SseReader,
  done: (tasks: any[]) => boolean,
): Promise<{ events: SseEvent[]; tasks: any[] }> {
  const events: SseEvent[] = [];
  const tasks: any[] = [];
  while (!done(tasks)) {
    const e = await sse.next();
    if (!e) throw new Error(`stream ended after ${JSON.stringify(tasks)}`);
    if (e.event !== "task") continue;
    events.push(e);
    tasks.push(JSON.parse(e.data));
  }
  return { events, tasks };
}

const lastSeq = (key: string) => runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.log.lastSeq());

const stateChanges = async (key: string) =>
  (await invoke("session_status", { changesSince: 0 }, { sessionKey: key })).details.stateChanges.events.filter(
    (e: any) => e.kind === "task_changed",
  );

describe("task events on the owner's stream", () => {
  it("a sub-agent's task: each status once, in order, as the record GET /v1/tasks/{id} serves; each move a task_changed", async () => {
    setConfigOverride(subagentConfig());
    installFakes(() => "all done");
    const req = requesterKey("task-events");
    await sessionStub(req).ensureSession();
    const t = await spawn(req, { task: "count the files", label: "files" });
    await settle(t.childSessionKey);
    const { res, sse } = await openStream(`/v1/sessions/${enc(req)}/events?lastEventId=0`);
    expect(res.status).toBe(200);
    const { events, tasks } = await taskEventsUntil(sse, (ts) =>
      ts.some((x) => x.status === "succeeded" && x.deliveryStatus !== "pending"),
    );
    await sse.cancel();
    for (const x of tasks) expect(x).toMatchObject({ taskId: t.taskId, runtime: "subagent", label: "files" });
    // A status never goes back, and each one is reported once.
    const statuses = tasks.map((x) => x.status).filter((s, i, all) => i === 0 || s !== all[i - 1]);
    expect(statuses).toEqual([...new Set(statuses)]);
    expect(statuses.map(rank)).toEqual([...statuses.map(rank)].sort());
    expect(statuses.at(-1)).toBe("succeeded");
    // The last event is the task as it is now.
    expect(tasks.at(-1)).toEqual((await call("GET", `/v1/tasks/${enc(t.taskId)}`)).json);
    // Each status move is a state change at that event's seq; the rest (delivery) are events alone.
    const changes = await stateChanges(req);
    expect(changes.map((c: any) => [c.summary, c.actorType, c.payload])).toEqual(
      statuses.map((s) => [`subagent task ${s}`, "system", { taskId: t.taskId, runtime: "subagent", status: s }]),
    );
    const seqOf = (e: SseEvent) => Number(e.id?.split(":").at(-1));
    const moved = events.filter((_e, i) => i === 0 || tasks[i].status !== tasks[i - 1].status);
    expect(changes.map((c: any) => c.sequence)).toEqual(moved.map(seqOf));
  });

  it("a cancel reaches a live watcher as `cancelled`; a repeated report changes nothing and sends nothing", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "hang" : "notes"));
    const req = requesterKey("task-cancel-events");
    await sessionStub(req).ensureSession();
    const t = await spawn(req, { task: "a long survey" });
    const { sse } = await openStream(`/v1/sessions/${enc(req)}/events`);
    const cancel = await call("POST", `/v1/tasks/${enc(t.taskId)}/cancel`);
    expect(cancel.json).toMatchObject({ found: true, cancelled: true });
    const { tasks } = await taskEventsUntil(sse, (ts) => ts.some((x) => x.status === "cancelled"));
    await sse.cancel();
    expect(tasks.at(-1)).toMatchObject({ taskId: t.taskId, status: "cancelled", error: "Cancelled by operator." });
    await settle(t.childSessionKey);
    const before = await lastSeq(req);
    const again = await callExtension(sessionStub(req), "task-ledger", "report", {
      taskId: t.taskId,
      update: { status: "cancelled", error: "Cancelled by operator." },
    });
    expect(again).toEqual({ applied: true, refused: false });
    expect(await lastSeq(req)).toBe(before);
    // A late success is refused (docs/tasks.md): no event claims it either.
    const late = await callExtension(sessionStub(req), "task-ledger", "report", {
      taskId: t.taskId,
      update: { status: "succeeded" },
    });
    expect(late).toEqual({ applied: true, refused: true });
    expect(await lastSeq(req)).toBe(before);
  });

  it("any runtime's task is reported the same way (a yield here): kind, label, status, timestamps", async () => {
    const req = requesterKey("task-yield-events");
    await sessionStub(req).ensureSession();
    const { sse } = await openStream(`/v1/sessions/${enc(req)}/events`);
    const taskId = await runInDurableObject(sessionStub(req), async (obj: SessionObject) => {
      const id = obj.storage.transactionSync(
        () =>
          createTask(obj, { runtime: "yield", task: "wait for 2 children", label: "yield", notifyPolicy: "silent" })
            .taskId,
      );
      obj.storage.transactionSync(() => updateTask(obj, id, { status: "running" }));
      obj.storage.transactionSync(() => updateTask(obj, id, { status: "succeeded", terminalSummary: "2 results" }));
      await obj.timers.arm();
      return id;
    });
    const { tasks } = await taskEventsUntil(sse, (ts) => ts.length === 3);
    await sse.cancel();
    expect(tasks.map((x) => [x.runtime, x.label, x.task, x.status])).toEqual([
      ["yield", "yield", "wait for 2 children", "queued"],
      ["yield", "yield", "wait for 2 children", "running"],
      ["yield", "yield", "wait for 2 children", "succeeded"],
    ]);
    expect(tasks[0].startedAt).toBeUndefined();
    expect(tasks[1].startedAt).toBeGreaterThanOrEqual(tasks[0].createdAt);
    expect(tasks[2]).toMatchObject({ terminalSummary: "2 results", deliveryStatus: "not_applicable" });
    expect(tasks[2].endedAt).toBeGreaterThanOrEqual(tasks[2].startedAt);
    expect((await stateChanges(req)).map((c: any) => c.summary)).toEqual([
      "yield task queued",
      "yield task running",
      "yield task succeeded",
    ]);
    expect(tasks[2]).toEqual((await call("GET", `/v1/tasks/${enc(taskId)}`)).json);
  });
});

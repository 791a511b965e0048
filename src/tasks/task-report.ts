import { callExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunEndedEvent } from "../session/run-types";
import type { TimerRow } from "../session/timers";
import { ownerKeyOfTask } from "./task-id";
import { CANCELLED_BY_OPERATOR, type TaskInit, type TaskUpdate, taskStatusOfRun } from "./task-types";

/**
 * The child's side of a sub-agent task (docs/tasks.md, "How a sub-agent task moves"): what its task run does
 * is reported to the ledger of the session that spawned it, from a `task-report` timer row written in the
 * transaction that caused it (the lane grant, the run's end, the announce's hand-off). A report is the whole
 * picture so far (later facts merged into the pending row), so a report lost to an eviction is sent again
 * whole, and one that arrives late is judged by the owner's status rule (src/tasks/task-store.ts).
 */

export const TASK_REPORT_TIMER = "task-report";
/** Summary of a task's result sent to its owner (the owner keeps at most 500 bytes). */
const SUMMARY_CHARS = 600;

type Pending = TaskUpdate & { init?: TaskInit };

/**
 * Merge `update` into the pending report of task `taskId` (run here, owned elsewhere) and make it due at
 * `dueAt` (now by default). The report always carries `init`, so the owner records a task it has not heard of.
 * Inside the caller's transaction.
 */
export function queueTaskReportSync(
  host: SessionHost,
  taskId: string,
  update: TaskUpdate,
  init: TaskInit,
  dueAt = Date.now(),
): void {
  const row = host.timers.get(TASK_REPORT_TIMER, taskId);
  const before = row?.payload ? (JSON.parse(row.payload) as Pending) : {};
  host.timers.set(TASK_REPORT_TIMER, taskId, dueAt, { ...before, ...update, init });
}

/** Merge `update` into this child's pending report and make it due now. Inside the caller's transaction. */
export function reportTaskSync(host: SessionHost, update: TaskUpdate): void {
  const sub = host.meta?.subagent;
  if (!sub?.taskId || !host.meta) return;
  queueTaskReportSync(host, sub.taskId, update, {
    runtime: "subagent",
    taskId: sub.taskId,
    task: sub.task,
    ...(sub.label ? { label: sub.label } : {}),
    childSessionKey: host.key,
    agentId: host.meta.agentId,
  });
}

/** The task run ended: its status, error and the start of its result (inside the run-ending transaction). */
export function reportRunEnded(host: SessionHost, { run, input }: RunEndedEvent): void {
  const sub = host.meta?.subagent;
  if (input.kind !== "subagent_task" || !sub?.taskId) return;
  // A task run ended by a cancel is `cancelled` with the cancel's reason, whatever the abort said.
  const cancelled = sub.cancelled !== undefined && run.status === "aborted";
  reportTaskSync(host, {
    // An aborted run maps to `cancelled` (task-types.ts); a cancel only adds its reason.
    status: taskStatusOfRun(run.status),
    runId: run.runId,
    ...(cancelled ? { error: sub.cancelled?.reason ?? CANCELLED_BY_OPERATOR } : run.error ? { error: run.error } : {}),
    ...(run.status === "ok" && run.reply ? { terminalSummary: run.reply.slice(0, SUMMARY_CHARS) } : {}),
    ...(run.startedAt !== undefined ? { startedAt: run.startedAt } : {}),
    endedAt: run.endedAt ?? Date.now(),
    ...(run.model ? { model: run.model } : {}),
    totalTokens: host.meta?.totalTokens ?? 0,
  });
}

/**
 * Send the pending report to the owner. A throw leaves the row for the alarm's retry (backoff, attempt limit:
 * docs/timers.md); the row is cleared only when no newer fact was merged into it while the call was out.
 */
export async function sendTaskReport(host: SessionHost, timer: TimerRow): Promise<void> {
  const owner = ownerKeyOfTask(timer.ref);
  if (!owner || !timer.payload) {
    host.timers.clear(TASK_REPORT_TIMER, timer.ref);
    return;
  }
  const { init, ...update } = JSON.parse(timer.payload) as Pending;
  const unchanged = () => host.timers.get(TASK_REPORT_TIMER, timer.ref)?.payload === timer.payload;
  await callExtension(host.bindings.SESSIONS.getByName(owner), "task-ledger", "report", {
    taskId: timer.ref,
    update,
    ...(init ? { init } : {}),
  });
  host.storage.transactionSync(() => {
    if (unchanged()) host.timers.clear(TASK_REPORT_TIMER, timer.ref);
  });
}

/** Reports sent at once from one run's end; the alarm sends the rest. */
const DUE_REPORTS_PER_PASS = 8;

/**
 * Send the pending reports due now (or all with `upTo` ∞): a sub-agent child's, and those of the sends this
 * session runs for other sessions (send-task.ts). A failure stays for the alarm's retry.
 */
export async function sendDueReports(host: SessionHost, upTo = Date.now()): Promise<void> {
  if (!host.hasStorage || !host.meta) return;
  for (const t of host.timers.dueOfKinds([TASK_REPORT_TIMER], upTo, DUE_REPORTS_PER_PASS))
    await sendTaskReport(host, t).catch(() => undefined);
}

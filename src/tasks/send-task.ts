import { displayKey } from "../keys";
import type { SessionHost } from "../session/host";
import type { RunEndedEvent, RunRow } from "../session/run-types";
import type { RunInput, RunSnapshot } from "../session/types";
import { ownerKeyOfTask } from "./task-id";
import { queueTaskReportSync, TASK_REPORT_TIMER } from "./task-report";
import { type TaskInit, type TaskUpdate, taskStatusOfRun } from "./task-types";

/**
 * A long `sessions_send` as a ledger task (docs/tasks.md, "What creates a task"): a send is a task of its
 * requester's ledger when its caller stopped waiting while its run goes on — a fire-and-forget send
 * (`timeoutSeconds: 0`, an MCP task call) at once, a waited one once its wait has expired. A send whose run
 * ended within its wait is no task: its caller already holds the outcome.
 *
 * The run lives in the target, the task in the requester, so the target reports, as a sub-agent child does
 * (task-report.ts): a `task-report` row written in the target's own transactions — due at the end of the
 * caller's wait by the enqueue, due now by the run's start (once the wait is over) and by its end — each
 * carrying the whole picture so far. The wait's end is measured from the run's creation, which the caller's
 * wait starts after: a run that ended before it was seen ended by that wait.
 */

/** What `sessions_send` stores on its run (`input.data.sendTask`): the task id it minted and how long it waits. */
export interface SendTaskRef {
  taskId: string;
  /** The caller's wait in ms (0: fire-and-forget), as capped by the tool and the object (MAX_WAIT_MS). */
  waitMs: number;
}

/** The send's task reference on a run's input; null for any other run. */
function sendTaskOf(input: RunInput): SendTaskRef | null {
  const ref = input.data?.sendTask as Partial<SendTaskRef> | undefined;
  if (input.kind !== "send" || typeof ref?.taskId !== "string" || typeof ref.waitMs !== "number") return null;
  return ownerKeyOfTask(ref.taskId) ? { taskId: ref.taskId, waitMs: Math.max(0, ref.waitMs) } : null;
}

/** The task's label in the requester's ledger: where the send went. */
const sendTaskLabel = (targetKey: string) => `sessions_send to ${displayKey(targetKey)}`;

function initOf(host: SessionHost, ref: SendTaskRef, input: RunInput, runId: string): TaskInit {
  return {
    runtime: "send",
    taskId: ref.taskId,
    task: input.message,
    label: sendTaskLabel(host.key),
    runId,
    ...(host.meta ? { agentId: host.meta.agentId } : {}),
    // OpenClaw's policy for a Gateway-dispatched agent run: the outcome reaches the requester through the
    // agent-to-agent flow (reply-back turns, announce), a ledger note would add to its transcript (docs/tasks.md).
    notifyPolicy: "silent",
  };
}

/** Inside the enqueue transaction of a send's run: its report is due when the caller's wait ends. */
export function sendQueuedSync(host: SessionHost, queued: RunSnapshot, input: RunInput): void {
  const ref = sendTaskOf(input);
  if (!ref) return;
  queueTaskReportSync(
    host,
    ref.taskId,
    { status: "queued" },
    initOf(host, ref, input, queued.runId),
    queued.createdAt + ref.waitMs,
  );
}

/** Inside the transaction that starts a send's run: the pending report says `running` (due now once the wait is over). */
export function sendStartedSync(host: SessionHost, run: RunRow, input: RunInput): void {
  const ref = sendTaskOf(input);
  if (!ref) return;
  const waitEnds = run.created_at + ref.waitMs;
  const pending = host.timers.get(TASK_REPORT_TIMER, ref.taskId);
  const now = Date.now();
  // Within the wait the enqueue's row is still pending (it is due at the wait's end); none left means the
  // report was dropped (the run ended within the wait), so a start now has nothing to add to.
  if (!pending && now < waitEnds) return;
  const update: TaskUpdate = { status: "running", startedAt: run.started_at ?? now };
  queueTaskReportSync(host, ref.taskId, update, initOf(host, ref, input, run.id), pending?.due_at ?? now);
}

/**
 * Inside the run-ending transaction of a send's run: within the caller's wait the pending report is dropped
 * (no task); after it, the end is reported now (ok → succeeded, error → failed, timeout → timed_out,
 * aborted → cancelled, lost → lost: task-types.ts).
 */
export function sendEndedSync(host: SessionHost, { run, input }: RunEndedEvent): void {
  const ref = sendTaskOf(input);
  if (!ref) return;
  const now = Date.now();
  if (now < run.createdAt + ref.waitMs) {
    host.timers.clear(TASK_REPORT_TIMER, ref.taskId);
    return;
  }
  queueTaskReportSync(
    host,
    ref.taskId,
    {
      status: taskStatusOfRun(run.status),
      runId: run.runId,
      ...(run.error ? { error: run.error } : {}),
      ...(run.status === "ok" && run.reply ? { terminalSummary: run.reply.slice(0, 600) } : {}),
      ...(run.startedAt !== undefined ? { startedAt: run.startedAt } : {}),
      endedAt: run.endedAt ?? now,
      ...(run.model ? { model: run.model } : {}),
      ...(run.usage ? { totalTokens: run.usage.totalTokens } : {}),
    },
    initOf(host, ref, input, run.runId),
  );
}

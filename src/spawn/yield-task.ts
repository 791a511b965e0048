import type { SessionHost } from "../session/host";
import { createTask, updateTask } from "../tasks/task-api";
import { CHILD_FLOW, childFlowId } from "./child-slots";
import type { YieldBatch } from "./yield-rows";

/**
 * A yield's wait as a task of the yielding session's own ledger (docs/tasks.md, "What creates a task"):
 * `running` from the claim's transaction, ended in the transaction that ends the wait — `succeeded` when the
 * resume turn is queued after every child ended, `timed_out` when it is queued because the wait's bound
 * passed with children unheard of, `failed` when the batch's timer died and the children were told directly.
 * `silent`: the resumed turn is the session's notice, a ledger note would say it twice.
 */

export const YIELD_TASK_LABEL = "sessions_yield";
/** Why a batch's task failed: its timer died (docs/timers.md), each child's completion went out on its own. */
export const YIELD_TIMER_DIED =
  "The batch's timer gave up before the session could resume: each child's completion was told on its own.";

/** Inside the claim transaction: record the wait and return its task id. */
export function recordYieldTask(host: SessionHost, runId: string, children: string[]): string {
  const names = children.map((k) => {
    const slot = host.sql
      .exec<{ json: string }>("SELECT json FROM flows WHERE id = ? AND kind = ?", childFlowId(k), CHILD_FLOW)
      .toArray()[0];
    const label = slot ? (JSON.parse(slot.json) as { label?: string }).label : undefined;
    return label ? `${label} (${k})` : k;
  });
  const n = children.length;
  return createTask(host, {
    runtime: "yield",
    label: YIELD_TASK_LABEL,
    task: `Resume this session once its ${n} sub-agent${n === 1 ? "" : "s"} ended: ${names.join(", ")}`,
    runId,
    status: "running",
    notifyPolicy: "silent",
  }).taskId;
}

/** Inside the transaction that queues the resume turn: the wait is over, every child heard of or not. */
export function endYieldTaskResumed(host: SessionHost, b: YieldBatch, resumeRunId: string): void {
  if (!b.taskId) return;
  const missing = b.missing ?? [];
  const n = b.children.length;
  if (missing.length > 0) {
    updateTask(host, b.taskId, {
      status: "timed_out",
      error: `The wait ended without a report from ${missing.length} of ${n} sub-agents: ${missing.join(", ")}. Resumed in run ${resumeRunId}.`,
    });
    return;
  }
  updateTask(host, b.taskId, {
    status: "succeeded",
    terminalSummary: `All ${n} sub-agent${n === 1 ? "" : "s"} ended; resumed in run ${resumeRunId}.`,
  });
}

/** Inside the transaction that gives the batch up (its timer died). */
export function endYieldTaskFailed(host: SessionHost, b: YieldBatch): void {
  if (b.taskId) updateTask(host, b.taskId, { status: "failed", error: YIELD_TIMER_DIED });
}

import { callExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { TimerRow } from "../session/timers";
import { updateTask } from "./task-api";
import { getTaskRow, openTaskRows } from "./task-store";
import { CANCELLED_BY_OPERATOR, isTerminalTask } from "./task-types";

/**
 * Cancelling a task and everything below it (docs/tasks.md, "Cancel"). Each level is one durable step:
 *
 *   owner: task → `cancelled` + `task-cancel` timer for its child        (one transaction)
 *   timer: child.cancelTree → the child marks itself cancelled, its own open tasks `cancelled`, and writes a
 *          `task-cancel` timer for each of their children                (one transaction in the child)
 *          then every open run of the child is aborted                    (idempotent: abortRun of an ended run is a no-op)
 *   timer cleared once both answered; a throw (the child evicted, restarting) leaves it for the alarm's retry.
 *
 * So a cascade interrupted at any point resumes from the rows, never repeats a step with an effect (every step
 * is idempotent), and ends with every descendant's task `cancelled`. Each cancelled child tells its parent once,
 * through its announce (src/spawn/subagent-lifecycle.ts): the announce is keyed by the child's run.
 */

export const TASK_CANCEL_TIMER = "task-cancel";
/** Open runs a cancelled child aborts per step: runs execute one at a time, a handful are queued at most. */
const MAX_ABORTED_RUNS = 50;
/** Open tasks a cancelled child cancels per step: at most maxChildrenPerAgent (≤ 20) are open at once. */
const MAX_CANCELLED_TASKS = 100;

export interface CancelAnswer {
  found: boolean;
  cancelled: boolean;
  reason?: string;
}

/** The owner's side: cancel one task of this ledger and cascade into its child. */
export async function cancelTask(host: SessionHost, arg: { taskId: string; reason?: string }): Promise<CancelAnswer> {
  const row = getTaskRow(host, arg.taskId);
  if (!row) return { found: false, cancelled: false, reason: "Task not found." };
  if (isTerminalTask(row.status)) return { found: true, cancelled: false, reason: "Task is already terminal." };
  if (!row.child_key) return { found: true, cancelled: false, reason: "Task has no cancellable child session." };
  const reason = arg.reason ?? CANCELLED_BY_OPERATOR;
  host.storage.transactionSync(() => {
    updateTask(host, row.task_id, { status: "cancelled", error: reason });
    host.timers.set(TASK_CANCEL_TIMER, row.task_id, Date.now(), { childKey: row.child_key, reason });
  });
  await host.timers.arm();
  // The first level now, so the child's run has settled when the tool answers; the timer retries if it fails.
  const timer = host.timers.get(TASK_CANCEL_TIMER, row.task_id);
  if (timer) await cascadeStep(host, timer).catch(() => undefined);
  return { found: true, cancelled: true };
}

/** The `task-cancel` timer: one level of the cascade. */
export async function cascadeStep(host: SessionHost, timer: TimerRow): Promise<void> {
  const { childKey, reason } = JSON.parse(timer.payload ?? "{}") as { childKey?: string; reason?: string };
  if (!childKey) {
    host.timers.clear(TASK_CANCEL_TIMER, timer.ref);
    return;
  }
  const stub = host.bindings.SESSIONS.getByName(childKey);
  const { runIds } = await callExtension(stub, "task-ledger", "cancelTree", {
    reason: reason ?? CANCELLED_BY_OPERATOR,
  });
  for (const runId of runIds) await stub.abortRun(runId);
  host.storage.transactionSync(() => host.timers.clear(TASK_CANCEL_TIMER, timer.ref));
}

/**
 * The child's side (idempotent): mark this sub-agent cancelled (its task run's end then reports `cancelled`
 * and its announce skips the model step), cancel its own open tasks with a cascade timer each, and return the
 * runs to abort. A session that no longer exists has nothing left to cancel.
 */
export async function cancelTree(host: SessionHost, arg: { reason: string }): Promise<{ runIds: string[] }> {
  if (!host.meta) return { runIds: [] };
  const runIds = host.storage.transactionSync(() => {
    const now = Date.now();
    const sub = host.meta?.subagent;
    if (sub && !sub.cancelled) {
      sub.cancelled = { at: now, reason: arg.reason };
      host.saveMeta();
    }
    for (const row of openTaskRows(host, MAX_CANCELLED_TASKS)) {
      updateTask(host, row.task_id, { status: "cancelled", error: arg.reason }, now);
      if (row.child_key)
        host.timers.set(TASK_CANCEL_TIMER, row.task_id, now, { childKey: row.child_key, reason: arg.reason });
    }
    return host.sql
      .exec<{ id: string }>(
        "SELECT id FROM runs WHERE status IN ('queued', 'running') ORDER BY qseq LIMIT ?",
        MAX_ABORTED_RUNS,
      )
      .toArray()
      .map((r) => r.id);
  });
  await host.timers.arm();
  // The next level starts now rather than when the alarm comes round; a step that fails here is left to the
  // alarm's retry (its timer row stays), and a step the alarm runs meanwhile as well repeats only idempotent calls.
  void runDueSteps(host);
  return { runIds };
}

/** This session's due cascade steps, side by side (one per child: at most maxChildrenPerAgent). */
async function runDueSteps(host: SessionHost): Promise<void> {
  const due = host.timers.dueOfKinds([TASK_CANCEL_TIMER], Date.now(), MAX_CANCELLED_TASKS);
  await Promise.all(due.map((t) => cascadeStep(host, t).catch(() => undefined)));
}

import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import { sendEndedSync, sendStartedSync } from "./send-task";
import { createTask, TASK_PRUNE_TIMER, TASK_SWEEP_TIMER, updateTask } from "./task-api";
import { auditTasks, backingOf, pruneLedger, sweepTasks } from "./task-audit";
import { cancelTask, cancelTree, cascadeStep, TASK_CANCEL_TIMER } from "./task-cancel";
import { pageTasks } from "./task-page";
import { reportRunEnded, sendDueReports, sendTaskReport, TASK_REPORT_TIMER } from "./task-report";
import { getTaskRow, listTaskRows, recordOf } from "./task-store";
import {
  isTerminalTask,
  type TaskInit,
  type TaskRecord,
  type TaskUpdate,
  WAIT_MAX_SECONDS,
  WAIT_MAX_TASK_IDS,
} from "./task-types";
import { taskWaiters } from "./task-waiters";

/**
 * The task ledger (docs/tasks.md): every session object keeps the tasks it started in its `tasks` table, and
 * reports on the tasks it runs for another session. This extension is both sides: the owner's RPC (record,
 * report, list, wait, cancel, audit) with its sweep and retention timers, and the child's report and cascade
 * steps. Other runtimes record their own tasks through src/tasks/task-api.ts.
 */

export const LEDGER_EXTENSION = "task-ledger" as const;
/** Rows one ledger listing returns at most (docs/limits.md). */
export const TASK_LIST_MAX = 100;
/** Longest wait one call may hold in an object (`subagents wait` allows 60 s). */

/** A sub-agent child's task recorded by `sessions_spawn`, or a report arriving from its child. */
async function record(host: SessionHost, init: TaskInit): Promise<TaskRecord | null> {
  // Never creates the session: a ledger lives only in a session that exists.
  if (!host.meta) return null;
  const rec = host.storage.transactionSync(() => createTask(host, init));
  await host.timers.arm();
  return rec;
}

async function report(
  host: SessionHost,
  arg: { taskId: string; update: TaskUpdate; init?: TaskInit },
): Promise<{ applied: boolean; refused: boolean; ownerGone?: boolean }> {
  if (!host.meta) return { applied: false, refused: false, ownerGone: true };
  const res = host.storage.transactionSync(() => {
    // A report may come before sessions_spawn recorded the task (a fast child): it records it then.
    if (!getTaskRow(host, arg.taskId) && arg.init) createTask(host, { ...arg.init, taskId: arg.taskId });
    return updateTask(host, arg.taskId, arg.update);
  });
  await host.timers.arm();
  return { applied: res !== null, refused: res?.refused ?? false };
}

function list(host: SessionHost, arg: { sinceMs: number; limit: number }): TaskRecord[] {
  const limit = Math.max(1, Math.min(TASK_LIST_MAX, Math.floor(arg.limit)));
  return listTaskRows(host, arg.sinceMs, limit).map((r) => recordOf(host.key, r));
}

function get(host: SessionHost, taskIds: string[]): TaskRecord[] {
  return taskIds.flatMap((id) => {
    const r = getTaskRow(host, id);
    return r ? [recordOf(host.key, r)] : [];
  });
}

/**
 * Hold until one of `taskIds` of this ledger has ended, or `timeoutMs`; answers with the tasks as they are
 * then. Ids this ledger does not hold are left out of the answer (the tool reports them unavailable).
 */
async function waitTasks(host: SessionHost, arg: { taskIds: string[]; timeoutMs: number }): Promise<TaskRecord[]> {
  const ids = arg.taskIds.slice(0, WAIT_MAX_TASK_IDS);
  const now = get(host, ids);
  const ended = now.some((t) => isTerminalTask(t.status));
  const ms = Math.min(WAIT_MAX_SECONDS * 1000, Math.max(0, arg.timeoutMs));
  if (ended || ms === 0 || now.length === 0) return now;
  const waiters = taskWaiters(host);
  // Woken by any status change; only an end answers, so a queued → running move waits on for the time left.
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return get(host, ids);
    await waiters.wait(ids, left);
    const after = get(host, ids);
    if (after.some((t) => isTerminalTask(t.status)) || Date.now() >= deadline) return after;
  }
}

const ledgerRpc = {
  record: (host: SessionHost, init: TaskInit) => record(host, init),
  report: (host: SessionHost, arg: { taskId: string; update: TaskUpdate; init?: TaskInit }) => report(host, arg),
  list: (host: SessionHost, arg: { sinceMs: number; limit: number }) => list(host, arg),
  get: (host: SessionHost, taskIds: string[]) => get(host, taskIds),
  wait: (host: SessionHost, arg: { taskIds: string[]; timeoutMs: number }) => waitTasks(host, arg),
  /** How many `wait` calls are held in this instance now (tests attach before they change a task). */
  waiting: (host: SessionHost) => taskWaiters(host).size,
  cancel: (host: SessionHost, arg: { taskId: string; reason?: string }) => cancelTask(host, arg),
  cancelTree: (host: SessionHost, arg: { reason: string }) => cancelTree(host, arg),
  backing: (host: SessionHost, arg: { taskId: string }) => backingOf(host, arg.taskId),
  audit: (host: SessionHost) => auditTasks(host),
  page: (host: SessionHost, arg: { beforeSeq?: number; limit: number }) => pageTasks(host, arg),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "task-ledger": typeof ledgerRpc;
  }
}

export const taskLedgerExtension: SessionExtension = {
  name: LEDGER_EXTENSION,
  // A send this session runs for another session's ledger: its start and end (send-task.ts).
  onRunStarted: sendStartedSync,
  onRunEnded(host, event) {
    reportRunEnded(host, event);
    sendEndedSync(host, event);
  },
  // The end goes to the owner now, not when the alarm comes round: a `subagents wait` is woken by it.
  afterRunEnded: (host) => sendDueReports(host),
  // A child removed (cleanup "delete", archived) sends what it still owes its owner's ledger first (best effort:
  // a report lost here leaves the owner's sweep to find the child gone).
  beforeDelete: (host) => sendDueReports(host, Number.MAX_SAFE_INTEGER),
  rpc: ledgerRpc,
  timers: {
    // The owner may be busy or restarting: about an hour of attempts, then the owner's sweep finds the task's
    // end from the child itself (task-audit.ts), so a dead report delays the ledger, never loses the end.
    [TASK_REPORT_TIMER]: { policy: { maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 10 * 60_000 } },
    // A cascade step that keeps failing (the child unreachable for about an hour) dies visibly (GET …/timers/dead);
    // the ledger already says `cancelled`, and an operator retry runs the step again.
    [TASK_CANCEL_TIMER]: { policy: { maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 10 * 60_000 } },
    [TASK_SWEEP_TIMER]: {},
    [TASK_PRUNE_TIMER]: {},
  },
  onTimer(host, timer) {
    switch (timer.kind) {
      case TASK_REPORT_TIMER:
        return sendTaskReport(host, timer);
      case TASK_CANCEL_TIMER:
        return cascadeStep(host, timer);
      case TASK_SWEEP_TIMER:
        return sweepTasks(host);
      case TASK_PRUNE_TIMER:
        return pruneLedger(host);
    }
  },
};

import { cutText } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import type { TranscriptMessage } from "../session/types";
import { publishTaskChange } from "./task-events";
import { applyTaskUpdate, getTaskRow, insertTask, nextExpiry, recordOf, type TaskRow } from "./task-store";
import { isTerminalTask, type TaskInit, type TaskRecord, type TaskUpdate } from "./task-types";
import { wakeTaskWaiters } from "./task-waiters";

/**
 * The ledger's API for every runtime that records tasks (docs/tasks.md, "Recording a task"). A runtime that
 * runs in the owner's own object (a yield, a long send) calls these inside its own transaction, so the task
 * row and the state that causes it commit together:
 *
 *   host.storage.transactionSync(() => {
 *     const task = createTask(host, { runtime: "yield", task: "wait for 3 children", runId });
 *     …its own rows…
 *   });
 *   …later, in the transaction that ends the work…
 *   updateTask(host, taskId, { status: "succeeded", terminalSummary });
 *   await host.timers.arm();
 *
 * Work running in another object reports through the owner's RPC instead
 * (`callExtension(stub, "task-ledger", "report", { taskId, update })`, task-ledger.ts), retried from a timer
 * row as a sub-agent child does (task-report.ts).
 */

export const TASK_SWEEP_TIMER = "task-sweep";
export const TASK_PRUNE_TIMER = "task-prune";
export const LEDGER_REF = "ledger";
/** Open tasks are reconciled with what runs them this often (task-audit.ts). */
export const TASK_SWEEP_MS = 5 * 60_000;
const NOTE_PREVIEW_CHARS = 120;

/** Record a task in this session's ledger (idempotent on `taskId`). Inside the caller's transaction. */
export function createTask(host: SessionHost, init: TaskInit, now = Date.now()): TaskRecord {
  const deliveryStatus = init.deliveryStatus ?? (init.notifyPolicy === "silent" ? "not_applicable" : "pending");
  // Idempotent on the id: a task recorded before is no new event.
  const existed = init.taskId !== undefined && getTaskRow(host, init.taskId) !== undefined;
  const row = insertTask(host, { ...init, deliveryStatus }, now);
  if (!existed) publishTaskChange(host, undefined, row, now);
  armLedgerTimers(host, row);
  return recordOf(host.key, row);
}

/**
 * Apply a runtime's update under the status rule (task-store.ts). Returns the record after it, and whether
 * a status it asked for was refused because the task had already ended otherwise; null for an unknown task.
 * Inside the caller's transaction.
 */
export function updateTask(
  host: SessionHost,
  taskId: string,
  update: TaskUpdate,
  now = Date.now(),
): { record: TaskRecord; refused: boolean } | null {
  const before = getTaskRow(host, taskId);
  const applied = applyTaskUpdate(host, taskId, update, now);
  if (!applied) return null;
  if (applied.statusChanged) {
    notifyTransition(host, applied.row);
    wakeTaskWaiters(host, taskId);
  }
  // Read again: the note may have marked the task delivered (notifyTransition).
  publishTaskChange(host, before, getTaskRow(host, taskId) ?? applied.row, now);
  armLedgerTimers(host, applied.row);
  return { record: recordOf(host.key, applied.row), refused: applied.refused };
}

/** An open task keeps the reconciliation sweep armed; an ended one the retention timer (its next expiry). */
function armLedgerTimers(host: SessionHost, row: TaskRow): void {
  if (!isTerminalTask(row.status)) {
    host.timers.set(TASK_SWEEP_TIMER, LEDGER_REF, Date.now() + TASK_SWEEP_MS, undefined, { keepEarlier: true });
    return;
  }
  const next = nextExpiry(host);
  if (next !== null) host.timers.set(TASK_PRUNE_TIMER, LEDGER_REF, next, undefined, { keepEarlier: true });
}

/**
 * The notify policy (docs/tasks.md, "Notify policies"): `silent` records nothing; `done_only` notes the end;
 * `state_changes` notes every transition. A note is context in the owner's transcript, never a turn of its
 * own. A sub-agent's end already reaches its requester through its announce (src/spawn/subagent-lifecycle.ts),
 * so for sub-agents only `state_changes` adds notes (its non-terminal transitions).
 */
function notifyTransition(host: SessionHost, row: TaskRow): void {
  const terminal = isTerminalTask(row.status);
  const wanted =
    row.notify_policy === "state_changes"
      ? !(terminal && row.runtime === "subagent")
      : row.notify_policy === "done_only" && terminal && row.runtime !== "subagent";
  if (!wanted || !host.meta) return;
  const what = cutText(row.label || row.task, NOTE_PREVIEW_CHARS);
  const why = row.error ? `: ${cutText(row.error, NOTE_PREVIEW_CHARS)}` : "";
  const msg: TranscriptMessage = {
    role: "user",
    content: [{ type: "text", text: `[Task ${row.status}] ${what} (task ${row.task_id})${why}` }],
    timestamp: Date.now(),
    provenance: { kind: "internal_system", sourceSessionKey: row.child_key ?? host.key, sourceTool: "task_ledger" },
  };
  host.transcript.append(msg, null);
  if (terminal && row.runtime !== "subagent")
    host.sql.exec("UPDATE tasks SET delivery_status = 'delivered' WHERE task_id = ?", row.task_id);
}

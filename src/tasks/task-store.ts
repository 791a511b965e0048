import { cutText } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import { sessionKeyOfRun } from "../session/run-id";
import { newTaskId } from "./task-id";
import {
  type DeliveryStatus,
  isTerminalTask,
  LOST_TASK_RETENTION_MS,
  type NotifyPolicy,
  TASK_RETENTION_MS,
  type TaskInit,
  type TaskRecord,
  type TaskRuntime,
  type TaskStatus,
  type TaskUpdate,
} from "./task-types";

/**
 * The `tasks` table of a session object (src/session/schema.ts): the tasks this session started. All
 * synchronous, inside the caller's transaction. The status rule lives here and only here (docs/tasks.md,
 * "State machine"): a status moves forward only (queued → running → one terminal state), and the first
 * terminal state is final — a late "succeeded" never overwrites a "cancelled", a late "cancelled" never a
 * "succeeded".
 */

/** Task text kept per row; the full text stays in the child's transcript. */
export const TASK_TEXT_MAX_BYTES = 2_000;
export const TERMINAL_SUMMARY_MAX_BYTES = 500;
export const TASK_ERROR_MAX_BYTES = 1_000;
/** Rows one session keeps: past this, its oldest ended tasks are forgotten early (docs/limits.md). */
export const MAX_TASKS_PER_SESSION = 1_000;

export type TaskRow = {
  task_id: string;
  runtime: TaskRuntime;
  status: TaskStatus;
  child_key: string | null;
  run_id: string | null;
  agent_id: string | null;
  label: string | null;
  task: string;
  delivery_status: DeliveryStatus;
  notify_policy: NotifyPolicy;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  last_event_at: number | null;
  updated_at: number;
  cleanup_after: number | null;
  error: string | null;
  terminal_summary: string | null;
  terminal_outcome: "succeeded" | "blocked" | null;
  model: string | null;
  total_tokens: number | null;
};

const RANK: Record<TaskStatus, number> = {
  queued: 0,
  running: 1,
  succeeded: 2,
  failed: 2,
  timed_out: 2,
  cancelled: 2,
  lost: 2,
};

/** The ledger exists once the session has storage: reads of a session that never wrote anything find nothing. */
function hasLedger(host: SessionHost): boolean {
  return host.hasStorage && host.meta !== null;
}

export function recordOf(ownerKey: string, r: TaskRow): TaskRecord {
  return {
    taskId: r.task_id,
    runtime: r.runtime,
    requesterSessionKey: ownerKey,
    ownerKey,
    scopeKind: "session",
    ...(r.child_key ? { childSessionKey: r.child_key } : {}),
    // A send's run id names its target (src/session/run-id.ts): no column of its own.
    ...(r.runtime === "send" && r.run_id && sessionKeyOfRun(r.run_id)
      ? { targetSessionKey: sessionKeyOfRun(r.run_id)! }
      : {}),
    ...(r.agent_id ? { agentId: r.agent_id } : {}),
    ...(r.run_id ? { runId: r.run_id } : {}),
    ...(r.label ? { label: r.label } : {}),
    task: r.task,
    status: r.status,
    deliveryStatus: r.delivery_status,
    notifyPolicy: r.notify_policy,
    createdAt: r.created_at,
    ...(r.started_at !== null ? { startedAt: r.started_at } : {}),
    ...(r.ended_at !== null ? { endedAt: r.ended_at } : {}),
    ...(r.last_event_at !== null ? { lastEventAt: r.last_event_at } : {}),
    ...(r.cleanup_after !== null ? { cleanupAfter: r.cleanup_after } : {}),
    ...(r.error ? { error: r.error } : {}),
    ...(r.terminal_summary ? { terminalSummary: r.terminal_summary } : {}),
    ...(r.terminal_outcome ? { terminalOutcome: r.terminal_outcome } : {}),
    ...(r.model ? { model: r.model } : {}),
    ...(r.total_tokens !== null ? { totalTokens: r.total_tokens } : {}),
  };
}

export function getTaskRow(host: SessionHost, taskId: string): TaskRow | undefined {
  if (!hasLedger(host)) return undefined;
  return host.sql.exec<TaskRow>("SELECT * FROM tasks WHERE task_id = ?", taskId).toArray()[0];
}

/** When a terminal task is forgotten: a week after it ended, a lost one after a day. */
export function cleanupAfterOf(status: TaskStatus, endedAt: number): number {
  return endedAt + (status === "lost" ? LOST_TASK_RETENTION_MS : TASK_RETENTION_MS);
}

/** Insert a task (idempotent on its id: an existing row is kept as it is). Returns the row. */
export function insertTask(host: SessionHost, init: TaskInit, now = Date.now()): TaskRow {
  const taskId = init.taskId ?? newTaskId(host.key);
  const existing = getTaskRow(host, taskId);
  if (existing) return existing;
  const status = init.status ?? "queued";
  host.sql.exec(
    `INSERT INTO tasks (task_id, runtime, status, child_key, run_id, agent_id, label, task, delivery_status,
       notify_policy, created_at, started_at, last_event_at, updated_at, model)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    taskId,
    init.runtime,
    status,
    init.childSessionKey ?? null,
    init.runId ?? null,
    init.agentId ?? null,
    init.label ? cutText(init.label, 512) : null,
    cutText(init.task, TASK_TEXT_MAX_BYTES),
    init.deliveryStatus ?? "pending",
    init.notifyPolicy ?? "done_only",
    now,
    status === "running" ? now : null,
    now,
    now,
    init.model ?? null,
  );
  trimLedger(host);
  return getTaskRow(host, taskId)!;
}

/** Past MAX_TASKS_PER_SESSION rows, the oldest ended tasks go first (open tasks are never dropped). */
function trimLedger(host: SessionHost): void {
  const n = host.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM tasks").one().n;
  if (n <= MAX_TASKS_PER_SESSION) return;
  host.sql.exec(
    "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE cleanup_after IS NOT NULL ORDER BY cleanup_after LIMIT ?)",
    n - MAX_TASKS_PER_SESSION,
  );
}

export interface Applied {
  row: TaskRow;
  /** The status moved (a transition a notify policy may announce). */
  statusChanged: boolean;
  /** The update was refused because the task had already ended in another state (sticky terminal state). */
  refused: boolean;
}

/**
 * Apply an update under the status rule. Fields that describe the work (run id, model, tokens) follow the
 * newest report while the task is open; once it ended, only its delivery status and outcome may still
 * change (the result can reach the requester after the task ended), never its status or error.
 */
export function applyTaskUpdate(host: SessionHost, taskId: string, u: TaskUpdate, now = Date.now()): Applied | null {
  const row = getTaskRow(host, taskId);
  if (!row) return null;
  const wasTerminal = isTerminalTask(row.status);
  const next = u.status;
  const advances = next !== undefined && RANK[next] > RANK[row.status];
  const refused = next !== undefined && wasTerminal && next !== row.status;
  const status = advances ? next : row.status;
  const ends = advances && isTerminalTask(status);
  const set: Partial<TaskRow> = { updated_at: now };
  if (!wasTerminal) {
    set.last_event_at = now;
    if (u.runId) set.run_id = u.runId;
    if (u.model) set.model = u.model;
    if (u.totalTokens !== undefined) set.total_tokens = u.totalTokens;
  }
  if (advances) {
    set.status = status;
    if (status === "running" || ends) set.started_at = row.started_at ?? u.startedAt ?? now;
  }
  if (ends) {
    const endedAt = u.endedAt ?? now;
    set.ended_at = endedAt;
    set.cleanup_after = cleanupAfterOf(status, endedAt);
    if (u.error) set.error = cutText(u.error, TASK_ERROR_MAX_BYTES);
    if (u.terminalSummary) set.terminal_summary = cutText(u.terminalSummary, TERMINAL_SUMMARY_MAX_BYTES);
    set.terminal_outcome = status === "succeeded" ? (u.terminalOutcome ?? "succeeded") : null;
  } else if (wasTerminal && u.terminalOutcome && row.status === "succeeded") {
    set.terminal_outcome = u.terminalOutcome;
  }
  if (u.deliveryStatus) set.delivery_status = u.deliveryStatus;
  const cols = Object.keys(set) as (keyof TaskRow)[];
  host.sql.exec(
    `UPDATE tasks SET ${cols.map((c) => `${c} = ?`).join(", ")} WHERE task_id = ?`,
    ...cols.map((c) => set[c] ?? null),
    taskId,
  );
  return { row: getTaskRow(host, taskId)!, statusChanged: advances, refused };
}

/**
 * This session's tasks for a listing: open ones and those updated since `sinceMs`, newest update first,
 * at most `limit` (two index seeks; cost grows with the page, never the ledger).
 */
export function listTaskRows(host: SessionHost, sinceMs: number, limit: number): TaskRow[] {
  if (!hasLedger(host)) return [];
  return host.sql
    .exec<TaskRow>(
      `SELECT * FROM (
         SELECT * FROM tasks WHERE status IN ('queued', 'running')
         UNION
         SELECT * FROM tasks WHERE updated_at >= ?
       ) ORDER BY updated_at DESC, task_id LIMIT ?`,
      sinceMs,
      limit,
    )
    .toArray();
}

/** Open tasks, oldest event first (the sweep's reconciliation and the cascade). */
export function openTaskRows(host: SessionHost, limit: number): TaskRow[] {
  if (!hasLedger(host)) return [];
  return host.sql
    .exec<TaskRow>(
      "SELECT * FROM tasks WHERE status IN ('queued', 'running') ORDER BY last_event_at, task_id LIMIT ?",
      limit,
    )
    .toArray();
}

/** Forget tasks past their cleanupAfter (bounded per pass); returns the next expiry, or null. */
export function pruneTasks(host: SessionHost, now: number, batch: number): number | null {
  if (!hasLedger(host)) return null;
  host.sql.exec(
    "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE cleanup_after IS NOT NULL AND cleanup_after <= ? ORDER BY cleanup_after LIMIT ?)",
    now,
    batch,
  );
  return nextExpiry(host);
}

export function nextExpiry(host: SessionHost): number | null {
  const r = host.sql
    .exec<{ at: number | null }>("SELECT MIN(cleanup_after) AS at FROM tasks WHERE cleanup_after IS NOT NULL")
    .one();
  return r.at ?? null;
}

import { z } from "zod";
import type { SessionHost } from "../session/host";
import { LEDGER_REF, TASK_PRUNE_TIMER, TASK_SWEEP_MS, TASK_SWEEP_TIMER, updateTask } from "./task-api";
import { backingOfRow, type TaskBacking } from "./task-backing";
import { openTaskRows, pruneTasks, type TaskRow } from "./task-store";
import { isTerminalTask, taskStatusOfRun } from "./task-types";

/**
 * The ledger's upkeep (docs/tasks.md, "Retention and audit"): the `task-sweep` timer reconciles open tasks
 * with what runs them (a task whose child session is gone is `lost`), the `task-prune` timer forgets ended
 * tasks past their `cleanupAfter`, and the audit reports what looks wrong, in OpenClaw's codes.
 */

/** An open task unheard of this long is checked against its child (OpenClaw's grace before `lost`). */
export const TASK_LOST_AFTER_MS = 5 * 60_000;
/** Open tasks reconciled per sweep pass; the rest wait for the next pass. */
const SWEEP_BATCH = 20;
/** Rows forgotten per prune pass; the timer comes back at once while more are due. */
const PRUNE_BATCH = 200;
export const STALE_QUEUED_MS = 10 * 60_000;
export const STALE_RUNNING_MS = 30 * 60_000;
/** Findings one audit returns (docs/limits.md). */
export const AUDIT_MAX_FINDINGS = 200;
export const BACKING_GONE = "Its session is gone: nothing runs this task any more.";

/** The child's answer: is it still the session of this task, and how did its latest task run end? */
export function backingOf(host: SessionHost, taskId: string): TaskBacking {
  const sub = host.meta?.subagent;
  if (!host.hasStorage || sub?.taskId !== taskId) return { present: false };
  const run = host.sql
    .exec<{ id: string; status: string; error: string | null }>(
      "SELECT id, status, error FROM runs WHERE kind = 'subagent_task' ORDER BY qseq DESC LIMIT 1",
    )
    .toArray()[0];
  if (!run) return { present: true, status: "queued" };
  const status = taskStatusOfRun(run.status as Parameters<typeof taskStatusOfRun>[0]);
  const cancelled = status === "cancelled" && sub.cancelled;
  return {
    present: true,
    status,
    runId: run.id,
    ...(cancelled ? { error: sub.cancelled?.reason } : run.error ? { error: run.error } : {}),
  };
}

/** The `task-sweep` timer: reconcile open tasks unheard of for TASK_LOST_AFTER_MS, then come back while any is open. */
export async function sweepTasks(host: SessionHost): Promise<void> {
  const now = Date.now();
  const quiet = openTaskRows(host, SWEEP_BATCH).filter(
    (r) => (r.last_event_at ?? r.created_at) <= now - TASK_LOST_AFTER_MS,
  );
  for (const row of quiet) {
    const backing = await backingOfRow(host, row);
    if (!backing) continue;
    host.storage.transactionSync(() => {
      if (!backing.present) updateTask(host, row.task_id, { status: "lost", error: backing.error ?? BACKING_GONE });
      else if (backing.status && isTerminalTask(backing.status))
        updateTask(host, row.task_id, {
          status: backing.status,
          ...(backing.runId ? { runId: backing.runId } : {}),
          ...(backing.error ? { error: backing.error } : {}),
        });
      // Started there since (a send's run): running, and heard of now.
      else if (backing.status === "running" && row.status === "queued")
        updateTask(host, row.task_id, { status: "running" });
      // Still running there: heard of now, checked again a grace period later.
      else host.sql.exec("UPDATE tasks SET last_event_at = ? WHERE task_id = ?", now, row.task_id);
    });
  }
  host.storage.transactionSync(() => {
    if (openTaskRows(host, 1).length > 0) host.timers.set(TASK_SWEEP_TIMER, LEDGER_REF, now + TASK_SWEEP_MS);
    else host.timers.clear(TASK_SWEEP_TIMER, LEDGER_REF);
  });
}

/** The `task-prune` timer: forget ended tasks past their cleanupAfter; due again at the next expiry. */
export function pruneLedger(host: SessionHost): void {
  host.storage.transactionSync(() => {
    const now = Date.now();
    const next = pruneTasks(host, now, PRUNE_BATCH);
    if (next === null) host.timers.clear(TASK_PRUNE_TIMER, LEDGER_REF);
    else host.timers.set(TASK_PRUNE_TIMER, LEDGER_REF, Math.max(next, now));
  });
}

export const AUDIT_CODES = [
  "stale_queued",
  "stale_running",
  "lost",
  "delivery_failed",
  "missing_cleanup",
  "inconsistent_timestamps",
] as const;

export const taskFindingSchema = z
  .strictObject({
    code: z.enum(AUDIT_CODES),
    severity: z.enum(["warn", "error"]),
    taskId: z.string(),
    status: z.string(),
    detail: z.string(),
  })
  .meta({ id: "TaskFinding" });
export type TaskFinding = z.infer<typeof taskFindingSchema>;

export const taskAuditSchema = z
  .strictObject({
    sessionKey: z.string(),
    checkedAt: z.number().int(),
    openTasks: z.number().int().describe("Tasks still queued or running"),
    findings: z.array(taskFindingSchema),
    truncated: z.boolean().describe(`More than ${AUDIT_MAX_FINDINGS} findings: the rest were left out`),
  })
  .meta({ id: "TaskAudit", description: "What looks wrong in a session's task ledger (docs/tasks.md)." });
export type TaskAudit = z.infer<typeof taskAuditSchema>;

function findingsOf(r: TaskRow, now: number): TaskFinding[] {
  const f = (code: TaskFinding["code"], severity: TaskFinding["severity"], detail: string): TaskFinding => ({
    code,
    severity,
    taskId: r.task_id,
    status: r.status,
    detail,
  });
  const out: TaskFinding[] = [];
  if (r.status === "queued" && r.created_at <= now - STALE_QUEUED_MS)
    out.push(f("stale_queued", "warn", "Queued for more than 10 minutes"));
  if (r.status === "running" && (r.started_at ?? r.created_at) <= now - STALE_RUNNING_MS)
    out.push(f("stale_running", "error", "Running for more than 30 minutes"));
  if (r.status === "lost") out.push(f("lost", "warn", r.error ?? BACKING_GONE));
  if (r.delivery_status === "failed" && r.notify_policy !== "silent")
    out.push(f("delivery_failed", "warn", "Its result could not be handed to the requester"));
  if (isTerminalTask(r.status) && r.cleanup_after === null)
    out.push(f("missing_cleanup", "warn", "Ended without a cleanupAfter"));
  const started = r.started_at ?? r.created_at;
  if (started < r.created_at || (r.ended_at !== null && r.ended_at < started))
    out.push(f("inconsistent_timestamps", "warn", "Its timestamps are out of order"));
  return out;
}

/** The audit of one ledger: open tasks, then ended ones that may need a look, each scan bounded. */
export function auditTasks(host: SessionHost): TaskAudit {
  const now = Date.now();
  const empty: TaskAudit = { sessionKey: host.key, checkedAt: now, openTasks: 0, findings: [], truncated: false };
  if (!host.hasStorage || !host.meta) return empty;
  const open = host.sql
    .exec<{ n: number }>("SELECT COUNT(*) AS n FROM tasks WHERE status IN ('queued', 'running')")
    .one().n;
  const rows = host.sql
    .exec<TaskRow>(
      `SELECT * FROM tasks WHERE status IN ('queued', 'running', 'lost') OR delivery_status = 'failed'
         OR cleanup_after IS NULL AND status NOT IN ('queued', 'running')
         OR started_at < created_at OR ended_at < started_at
       ORDER BY created_at LIMIT ?`,
      AUDIT_MAX_FINDINGS + 1,
    )
    .toArray();
  const findings = rows.flatMap((r) => findingsOf(r, now));
  return {
    ...empty,
    openTasks: open,
    findings: findings.slice(0, AUDIT_MAX_FINDINGS),
    truncated: findings.length > AUDIT_MAX_FINDINGS || rows.length > AUDIT_MAX_FINDINGS,
  };
}

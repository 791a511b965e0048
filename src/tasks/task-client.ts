import { callExtension } from "../session/extensions";
import type { TaskAudit } from "./task-audit";
import type { CancelAnswer } from "./task-cancel";
import type { TaskPage } from "./task-page";
import type { TaskInit, TaskRecord } from "./task-types";

/**
 * Typed calls into a ledger from outside its object (tools, routes): each reaches the owner by its key
 * (for a task id, the key inside it: src/tasks/task-id.ts, read once per request by src/http/handle-owner.ts).
 */

function ledger(env: Env, ownerKey: string) {
  return env.SESSIONS.getByName(ownerKey);
}

export function recordSpawnTask(env: Env, ownerKey: string, init: TaskInit): Promise<TaskRecord | null> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "record", init);
}

export function listTasks(env: Env, ownerKey: string, sinceMs: number, limit: number): Promise<TaskRecord[]> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "list", { sinceMs, limit });
}

export function getTasksOf(env: Env, ownerKey: string, taskIds: string[]): Promise<TaskRecord[]> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "get", taskIds);
}

export function waitTasksOf(env: Env, ownerKey: string, taskIds: string[], timeoutMs: number): Promise<TaskRecord[]> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "wait", { taskIds, timeoutMs });
}

export function cancelTaskOf(env: Env, ownerKey: string, taskId: string): Promise<CancelAnswer> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "cancel", { taskId });
}

/** A page of the ledger's tasks that have a run, newest recorded first (src/tasks/task-page.ts). */
export function pageTasksOf(
  env: Env,
  ownerKey: string,
  beforeSeq: number | undefined,
  limit: number,
): Promise<TaskPage> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "page", { ...(beforeSeq ? { beforeSeq } : {}), limit });
}

export function auditTasksOf(env: Env, ownerKey: string): Promise<TaskAudit> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "audit");
}

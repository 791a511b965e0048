import { callExtension } from "../session/extensions";
import type { TaskAudit } from "./task-audit";
import type { CancelAnswer } from "./task-cancel";
import { ownerKeyOfTask } from "./task-id";
import type { TaskInit, TaskRecord } from "./task-types";

/**
 * Typed calls into a ledger from outside its object (tools, routes): each reaches the owner by its key,
 * or by the key inside a task id (src/tasks/task-id.ts).
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

/** One task by its id, or null (an id this deployment could not have minted, or a task the ledger forgot). */
export async function getTask(env: Env, taskId: string): Promise<TaskRecord | null> {
  const owner = ownerKeyOfTask(taskId);
  if (!owner) return null;
  const [t] = await callExtension(ledger(env, owner), "task-ledger", "get", [taskId]);
  return t ?? null;
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

export function auditTasksOf(env: Env, ownerKey: string): Promise<TaskAudit> {
  return callExtension(ledger(env, ownerKey), "task-ledger", "audit");
}

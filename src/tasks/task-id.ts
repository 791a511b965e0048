import { newRunId, sessionKeyOfRun } from "../session/run-id";

/**
 * Task ids are shaped like run ids (`<uuid>.<base64url(ownerKey)>`, src/session/run-id.ts): the key of the
 * session whose ledger holds the task is inside the id, so `subagents wait|cancel`, `GET /v1/tasks/{id}` and
 * any later protocol that hands task ids out as a run's handle reach the right object with no lookup table
 * (docs/tasks.md, "Task ids"). The id is minted once, when the task is recorded, and never changes: a task
 * whose work moves to another run keeps it.
 */
export function newTaskId(ownerKey: string): string {
  return newRunId(ownerKey);
}

/** The owner session's canonical key, or null for an id this deployment could not have minted. */
export function ownerKeyOfTask(taskId: string): string | null {
  return sessionKeyOfRun(taskId);
}

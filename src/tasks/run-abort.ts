import type { RunSnapshot } from "../session/run-schema";
import { FINAL_STATUSES } from "../session/types";
import { cancelTaskOf } from "./task-client";
import { ownerKeyOfTask } from "./task-id";

export interface RunAbort {
  /** The run after the abort (null: no such run in that session). */
  run: RunSnapshot | null;
  /** This call found the run open and ended it; false when it had already ended (the abort was a no-op). */
  applied: boolean;
}

/**
 * Abort a run by its handle — the one abort behind `POST /v1/runs/{id}/abort`, MCP `tasks/cancel` and A2A
 * `CancelTask` (docs/protocols.md, "One handle"), so a run ends the same way whichever surface asks.
 *
 * A sub-agent's task run (its snapshot names its ledger task, src/session/session-object.ts) is cancelled
 * through its requester's ledger (src/tasks/task-cancel.ts): the task `cancelled` and a `task-cancel` timer
 * for the child in one transaction of the owner, whose first step — the child and its open runs — runs
 * before this answers; the levels below follow from their own timer rows, so every descendant ends even if
 * an object restarts meanwhile. The run's own `abortRun` comes last: a no-op once the cascade ended the run,
 * and the end of it when the ledger no longer holds the task open (swept `lost`, the requester deleted) or
 * the first step failed (its timer retries the rest). Ending a run is one transaction of its session's queue
 * that only moves an open run (src/session/run-queue.ts), so two surfaces asking at once end it once.
 */
export async function abortRunHandle(env: Env, key: string, runId: string): Promise<RunAbort> {
  const stub = env.SESSIONS.getByName(key);
  const before = await stub.getRun(runId);
  if (!before || FINAL_STATUSES.has(before.status)) return { run: before, applied: false };
  const owner = before.taskId ? ownerKeyOfTask(before.taskId) : null;
  if (owner && before.taskId) await cancelTaskOf(env, owner, before.taskId);
  const after = await stub.abortRun(runId);
  return { run: after ?? before, applied: true };
}

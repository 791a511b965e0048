import { callExtension } from "../session/extensions";
import { getFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { sessionKeyOfRun } from "../session/run-id";
import { batchIdOf, OPEN_BATCH_STATES, YIELD_FLOW } from "../spawn/yield-rows";
import type { TaskRow } from "./task-store";
import { type TaskStatus, taskStatusOfRun } from "./task-types";

/**
 * What the owner's sweep (task-audit.ts) asks about an open task it has not heard of for a while: is the
 * thing that runs it still there, and how did it end? A sub-agent's child session answers for itself, a
 * send's target for its run, a yield's batch is a row of the owner itself.
 */

/** What runs a task says of it (the sub-agent child's `backing` RPC, a send's run, a yield's batch). */
export interface TaskBacking {
  present: boolean;
  status?: TaskStatus;
  runId?: string;
  error?: string;
}

export const SEND_RUN_GONE = "Its run is gone from the target session: nothing runs this send any more.";
export const YIELD_BATCH_GONE = "Its yield batch is gone: nothing will resume this session for it.";

/** null: nothing to ask (a row without what names its work). */
export async function backingOfRow(host: SessionHost, row: TaskRow): Promise<TaskBacking | null> {
  switch (row.runtime) {
    case "subagent":
      return row.child_key
        ? callExtension(host.bindings.SESSIONS.getByName(row.child_key), "task-ledger", "backing", {
            taskId: row.task_id,
          })
        : null;
    case "send": {
      const target = row.run_id ? sessionKeyOfRun(row.run_id) : null;
      if (!target || !row.run_id) return null;
      const run =
        target === host.key
          ? await host.getRun(row.run_id)
          : await host.bindings.SESSIONS.getByName(target).getRun(row.run_id);
      if (!run) return { present: false, error: SEND_RUN_GONE };
      return {
        present: true,
        status: taskStatusOfRun(run.status),
        runId: run.runId,
        ...(run.error ? { error: run.error } : {}),
      };
    }
    case "yield": {
      const batch = row.run_id ? getFlowRow(host.sql, batchIdOf(row.run_id), YIELD_FLOW) : null;
      if (!batch) return { present: false, error: YIELD_BATCH_GONE };
      if ((OPEN_BATCH_STATES as readonly string[]).includes(batch.state)) return { present: true, status: "running" };
      // Ended without its task being told (not expected: both are one transaction): what the batch came to.
      return batch.state === "failed"
        ? { present: true, status: "failed", error: "The batch gave up." }
        : { present: true, status: "succeeded" };
    }
  }
}

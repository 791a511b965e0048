import type { SessionHost } from "../session/host";

/**
 * The yield batch's flow rows (`yield:<runId>`, kind `subagent_yield`), apart from their logic
 * (yield-batch.ts) so that the child-slot and announce code can ask "is a yield still pending here?"
 * without importing it (no import cycle: scripts/check-cycles.mjs).
 *
 *   claimed   the yielding run called sessions_yield and still runs (its children are frozen here)
 *   waiting   the yielding run ended; the batch waits for every child to end (give-up timer)
 *   settled   every child ended (or the wait gave up): the resume turn is owed (timer due now)
 *   resuming  the resume turn is queued or running
 *   done      the resume turn ended with an answer · fallback: it failed, the children's announces went directly
 *   failed    the batch's timer gave up; the children's announces went directly
 */
export const YIELD_FLOW = "subagent_yield";
export type BatchState = "claimed" | "waiting" | "settled" | "resuming" | "done" | "fallback" | "failed";
export const OPEN_BATCH_STATES: readonly BatchState[] = ["claimed", "waiting", "settled", "resuming"];

export const batchIdOf = (runId: string) => `yield:${runId}`;

/** A batch, as its row keeps it. */
export interface YieldBatch {
  /** The run that yielded. */
  runId: string;
  /** How many batches this session had before: OpenClaw's rearm generation. */
  generation: number;
  /** Child keys frozen at the claim, in creation order. */
  children: string[];
  /** The batch's task in this session's ledger (src/spawn/yield-task.ts), recorded by the claim. */
  taskId?: string;
  /** The tool's private `message` for the resumed turn. */
  message: string;
  acknowledgment?: string;
  waitingSince?: number;
  giveUpAt?: number;
  /** Children still running when the wait gave up. */
  missing?: string[];
  resumeRunId?: string;
  /** The resume turn's reply goes to the session's route: the yielded turn was a message asking for delivery. */
  deliver?: boolean;
}

/** Whether a yield of this session still owes a resumed turn (a sub-agent's announce waits for it). */
export function yieldPending(host: SessionHost): boolean {
  return (
    host.sql
      .exec(
        `SELECT 1 FROM flows WHERE kind = ? AND state IN (${OPEN_BATCH_STATES.map(() => "?").join(", ")}) LIMIT 1`,
        YIELD_FLOW,
        ...OPEN_BATCH_STATES,
      )
      .toArray().length > 0
  );
}

/** The open batches of this session (a handful at most: one per yielding turn still waiting). */
export function openBatches(host: SessionHost): { id: string; state: BatchState; batch: YieldBatch }[] {
  return host.sql
    .exec<{ id: string; state: BatchState; json: string }>(
      `SELECT id, state, json FROM flows WHERE kind = ? AND state IN (${OPEN_BATCH_STATES.map(() => "?").join(", ")}) ORDER BY created_at LIMIT 32`,
      YIELD_FLOW,
      ...OPEN_BATCH_STATES,
    )
    .toArray()
    .map((r) => ({ id: r.id, state: r.state, batch: JSON.parse(r.json) as YieldBatch }));
}

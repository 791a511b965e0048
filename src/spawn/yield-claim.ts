import { parseCanonical } from "../keys";
import { getFlowRow, moveFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import type { ChildOutcome } from "./announce-format";
import { childKeyOfFlowId } from "./child-slot-rows";
import { CHILD_FLOW, releaseSlotSync } from "./child-slots";
import { ANNOUNCE_IN_FLOW } from "./direct-announce";
import { batchIdOf, openBatches, YIELD_FLOW, type YieldBatch } from "./yield-rows";
import { recordYieldTask } from "./yield-task";

/**
 * The claim of `sessions_yield` in the caller's own object (docs/subagents.md, "sessions_yield"): one
 * transaction decides the outcome and, on success, freezes the batch — every child this run spawned —
 * before the tool answers, so the run can stop knowing its claim is durable. Children that already
 * announced and wait for a completion turn ("requester" delivery) join the batch too: the batch, not
 * their own turn, delivers them.
 */

export const NOT_SUPPORTED = "Yield not supported in this context";
export const CRON_REFUSAL =
  "Isolated automation turns cannot use sessions_yield because no requester continuation is available. Finish this turn so the scheduler can handle child output under the job's delivery policy.";
export const NO_CLAIM =
  'No pending child completion is owned by this turn. If the assigned work is complete, return its result normally. An unfinished subagent waiting for an incoming continuation must explicitly set waitFor: "message".';
/** Switchboard cannot continue a paused sub-agent from outside yet (docs/subagents.md): said, never pretended. */
export const WAIT_FOR_MESSAGE_UNSUPPORTED =
  'waitFor: "message" is not supported here: a sub-agent cannot pause for an outside continuation. Finish this turn and say in your result what is still pending.';

/** Children one run may freeze into its batch (a run has at most 8 tool steps; docs/limits.md). */
export const MAX_BATCH_CHILDREN = 64;

export interface ClaimArgs {
  runId: string;
  message: string;
  acknowledgment?: string;
  waitFor?: "message";
}

/** A child that still owes a completion from an earlier turn (`already_pending`). */
export interface PendingChild {
  childSessionKey: string;
  label?: string;
  startedAt: number;
  state: "running" | "completing";
  wakeArmed: boolean;
}

export type ClaimResult =
  | { status: "yielded"; children: number }
  | { status: "already_pending"; pending: PendingChild[] }
  | { status: "error"; error: string };

/** What a turn-pending completion event row keeps (src/spawn/requester-turn.ts), as far as a batch needs it. */
interface PendingEventRow {
  childKey: string;
  childRunId: string;
  message: string;
  route: unknown;
  threadId?: string;
  outcome?: ChildOutcome;
}

/** Inside the claim transaction. */
export function claimSync(host: SessionHost, arg: ClaimArgs): ClaimResult {
  const run = host.runRow(arg.runId);
  // Only a live run can end its turn on purpose; a run token of a run that already ended cannot.
  if (run?.status !== "running") return { status: "error", error: NOT_SUPPORTED };
  if (parseCanonical(host.key, host.cfg).kind === "cron") return { status: "error", error: CRON_REFUSAL };
  const id = batchIdOf(arg.runId);
  const existing = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  // A repeated claim of the same turn (the model yields twice, or a lost tool answer is retried) changes nothing.
  if (existing && existing.state !== "claimed") return { status: "yielded", children: existing.data.children.length };
  const since = run!.started_at ?? run!.created_at;
  // Runs are one at a time per session (src/session/run-queue.ts): a child slot reserved since this run
  // started was reserved by this run.
  const kids = host.sql
    .exec<{ id: string }>(
      // A slot released "gone" held a spawn that failed (or a child deleted since): nothing of it to wait for.
      "SELECT id FROM flows WHERE kind = ? AND created_at >= ? AND state != 'gone' ORDER BY created_at, rowid LIMIT ?",
      CHILD_FLOW,
      since,
      MAX_BATCH_CHILDREN,
    )
    .toArray()
    .map((r) => childKeyOfFlowId(r.id));
  if (kids.length > 0) {
    const generation =
      existing?.data.generation ??
      host.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM flows WHERE kind = ?", YIELD_FLOW).one().n + 1;
    const batch: YieldBatch = {
      runId: arg.runId,
      generation,
      children: kids,
      message: arg.message,
      ...(arg.acknowledgment ? { acknowledgment: arg.acknowledgment } : {}),
      // The wait is a ledger task from this transaction on (a repeated claim keeps the one it recorded).
      taskId: existing?.data.taskId ?? recordYieldTask(host, arg.runId, kids),
    };
    putFlowRow(host.sql, { id, kind: YIELD_FLOW, state: "claimed", data: batch }, "update");
    // The turn is over once claimed: if its executor is lost before the run ends, its lease ends it (lost)
    // instead of running the turn again (src/session/run-queue.ts `onLeaseExpired` retries below 2 attempts),
    // which would spawn its children a second time. The batch goes on either way (yield-batch.ts).
    host.sql.exec("UPDATE runs SET attempts = MAX(attempts, 2) WHERE id = ?", arg.runId);
    absorbWaitingEvents(host, id, kids);
    return { status: "yielded", children: kids.length };
  }
  if (arg.waitFor === "message" && host.meta?.subagent) return { status: "error", error: WAIT_FOR_MESSAGE_UNSUPPORTED };
  const pending = pendingChildren(host, since);
  if (pending.length > 0) return { status: "already_pending", pending };
  return { status: "error", error: NO_CLAIM };
}

/**
 * Completions of batch children that arrived before the claim and wait for a completion turn: the batch
 * delivers them now (OpenClaw marks their individual delivery as intentionally not done). Their slots end
 * with their outcomes, which the settlement reads.
 */
function absorbWaitingEvents(host: SessionHost, batchId: string, kids: string[]): void {
  const rows = host.sql
    .exec<{ id: string; json: string }>(
      "SELECT id, json FROM flows WHERE kind = ? AND state = 'turn_pending' LIMIT ?",
      ANNOUNCE_IN_FLOW,
      MAX_BATCH_CHILDREN * 4,
    )
    .toArray();
  const members = new Set(kids);
  for (const r of rows) {
    const e = JSON.parse(r.json) as PendingEventRow;
    if (!members.has(e.childKey)) continue;
    moveFlowRow(host.sql, r.id, "batched", { data: { ...e, batch: batchId }, from: "turn_pending" });
    releaseSlotSync(host, e.childKey, e.outcome);
  }
}

/** Children of earlier turns that still owe their completion: their slot runs, or an open batch delivers them. */
function pendingChildren(host: SessionHost, since: number): PendingChild[] {
  const armed = new Set<string>();
  for (const b of openBatches(host)) for (const k of b.batch.children) armed.add(k);
  const slots = host.sql
    .exec<{ state: string; json: string; created_at: number }>(
      "SELECT state, json, created_at FROM flows WHERE kind = ? AND created_at < ? AND (state = 'running' OR id IN (SELECT 'child:' || value FROM json_each(?))) ORDER BY created_at, rowid LIMIT ?",
      CHILD_FLOW,
      since,
      JSON.stringify([...armed]),
      MAX_BATCH_CHILDREN,
    )
    .toArray();
  return slots.map((s) => {
    const j = JSON.parse(s.json) as { childKey: string; label?: string };
    return {
      childSessionKey: j.childKey,
      ...(j.label ? { label: j.label } : {}),
      startedAt: s.created_at,
      // Ended but not yet delivered (an open batch holds its result, or its completion turn is owed).
      state: s.state === "running" && !hasAnnounced(host, j.childKey) ? "running" : "completing",
      wakeArmed: armed.has(j.childKey),
    };
  });
}

function hasAnnounced(host: SessionHost, childKey: string): boolean {
  const prefix = `announce:v1:${childKey}:`;
  return (
    host.sql
      .exec(
        "SELECT 1 FROM flows WHERE kind = ? AND substr(id, 1, ?) = ? LIMIT 1",
        ANNOUNCE_IN_FLOW,
        prefix.length,
        prefix,
      )
      .toArray().length > 0
  );
}

import { queueDelivery, recordedRoute } from "../channels/outbox";
import type { FlowFinding } from "../session/audit-types";
import type { SessionExtension } from "../session/extensions";
import { getFlowRow, moveFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { timerGuard } from "../session/run-audit";
import type { RunEndedEvent } from "../session/run-types";
import type { DeadTimer } from "../session/timer-policy";
import type { TimerRow } from "../session/timers";
import type { ChildOutcome } from "./announce-format";
import { childKeyOfFlowId } from "./child-slot-rows";
import { CHILD_FLOW, releaseSlotSync, resumeDeferredAnnouncesIfIdle } from "./child-slots";
import { SUBAGENT_TASK_IDEMPOTENCY_KEY } from "./child-spawn";
import { ANNOUNCE_IN_FLOW, type AnnounceHandoff, recordDirectAnnounce } from "./direct-announce";
import { isSubagentRequester, turnAnswer } from "./requester-turn";
import { type ClaimArgs, type ClaimResult, claimSync, MAX_BATCH_CHILDREN, NOT_SUPPORTED } from "./yield-claim";
import { batchIdOf, OPEN_BATCH_STATES, openBatches, YIELD_FLOW, type YieldBatch } from "./yield-rows";
import { GIVE_UP, settleIfReady, slotIds, YIELD_TIMER } from "./yield-settle";
import { formatSettlement, type SettledChild, yieldContextText } from "./yield-settlement";
import { endYieldTaskFailed, endYieldTaskResumed } from "./yield-task";

/**
 * The yielded batch (docs/subagents.md, "sessions_yield"): a session that ended its turn with
 * `sessions_yield` resumes exactly once, in one new turn whose input carries every child's result.
 * Every step is a row written with its cause, so an eviction between any two repeats nothing and loses
 * nothing:
 *
 *   sessions_yield          → batch `claimed`, children frozen                     (claim transaction, yield-claim.ts)
 *   yielding run ends       → `waiting` + hidden context entry + `subagent-yield` give-up timer
 *                                                                                  (run-ending transaction)
 *   a batch child announces → its result kept (slot `ended`, event `batched`), no turn of its own;
 *                             the last one → `settled` + timer due now          (receive transaction)
 *   give-up timer (5 h)     → `settled` with the children that did not report named
 *   timer                   → the resume turn queued (idempotent key), `resuming` (enqueue transaction)
 *   resume turn ends        → its reply delivered (NO_REPLY: silent), `done`; failed → each child's
 *                             direct announce instead, `fallback`                 (run-ending transaction)
 */

export const YIELD_EXTENSION = "subagent-yield" as const;
export { YIELD_TIMER } from "./yield-settle";
/**
 * A batch waits this long at most for its children (docs/limits.md): children end by their own deadlines or
 * the lost-run sweeper long before; this only bounds a child that never reports. Shorter than the announce
 * cap of a yielded sub-agent (6 h, src/spawn/subagent-lifecycle.ts), so its resumed turn still reports.
 */
export const YIELD_WAIT_MAX_MS = 5 * 60 * 60_000;
const resumeKey = (batchId: string) => `yield:resume:${batchId}`;

/**
 * A batch child's completion, kept for the resume turn and for the direct announce if that turn fails: the
 * handoff's own fields (src/spawn/direct-announce.ts), so the two cannot drift, plus the batch it joined.
 */
type BatchedEvent = Pick<AnnounceHandoff, "childKey" | "childRunId" | "message" | "route" | "threadId" | "outcome"> & {
  batch: string;
};

/**
 * Inside the receive transaction (src/spawn/requester-side.ts): a child of a batch still open for it
 * announces to the batch, not individually. False: not a batch child (or its batch stopped waiting).
 */
export function absorbIntoBatch(host: SessionHost, h: AnnounceHandoff): boolean {
  const open = openBatches(host).find(
    (b) => (b.state === "claimed" || b.state === "waiting") && b.batch.children.includes(h.childKey),
  );
  if (!open) return false;
  const now = Date.now();
  const row: BatchedEvent = {
    childKey: h.childKey,
    childRunId: h.childRunId,
    message: h.message,
    ...(h.route ? { route: h.route } : {}),
    ...(h.threadId ? { threadId: h.threadId } : {}),
    ...(h.outcome ? { outcome: h.outcome } : {}),
    batch: open.id,
  };
  putFlowRow(host.sql, { id: h.idempotencyKey, kind: ANNOUNCE_IN_FLOW, state: "batched", data: row }, "fail", now);
  // The slot's end settles the batch when this was its last child (src/spawn/yield-settle.ts).
  releaseSlotSync(host, h.childKey, h.outcome);
  return true;
}

/** Inside every run-ending transaction (after the completion turns released their slots). */
function onRunEnded(host: SessionHost, event: RunEndedEvent): void {
  const { run, input } = event;
  const now = Date.now();
  const id = batchIdOf(run.runId);
  const own = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  if (own?.state === "claimed") {
    // The yielded turn's private note for the resumed one: model context, hidden from history (its run kind).
    host.transcript.append(
      {
        role: "user",
        content: [{ type: "text", text: yieldContextText(own.data.message) }],
        timestamp: now,
        provenance: { kind: "internal_system", sourceSessionKey: host.key, sourceTool: "sessions_yield" },
      },
      run.runId,
      "subagent_completion",
    );
    // The answer goes where the request's reply would have gone: a message that asked for delivery (or a
    // resumed turn of one, yielding again) gets it on its route; any other turn's answer stays in the session.
    const parent =
      typeof input.data?.yieldBatch === "string" ? getFlowRow<YieldBatch>(host.sql, input.data.yieldBatch) : null;
    const deliver = input.kind === "inbound" ? input.deliver === true : parent?.data.deliver === true;
    const batch: YieldBatch = {
      ...own.data,
      waitingSince: now,
      giveUpAt: now + YIELD_WAIT_MAX_MS,
      ...(deliver ? { deliver } : {}),
    };
    moveFlowRow(host.sql, id, "waiting", { data: batch, now });
    host.timers.set(YIELD_TIMER, id + GIVE_UP, now + YIELD_WAIT_MAX_MS);
    // Its children may all have ended while the turn still ran; from here their slots' ends settle it.
    settleIfReady(host, id, batch, now, false);
  }
  const resumed = typeof input.data?.yieldBatch === "string" ? input.data.yieldBatch : null;
  if (resumed) resumeEnded(host, resumed, event, now);
}

/** The resume turn ended: its reply speaks for the batch, or — when it failed — each child's direct announce does. */
function resumeEnded(host: SessionHost, id: string, { run }: RunEndedEvent, now: number): void {
  const row = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  if (row?.state !== "resuming") return;
  const turn = turnAnswer(run);
  const { reply, silent } = turn;
  // A resume turn that yielded again hands the work to its own batch: nothing to say yet, nothing lost.
  const yieldedAgain = getFlowRow(host.sql, batchIdOf(run.runId), YIELD_FLOW) !== null;
  const answered = turn.answered || (run.status === "ok" && yieldedAgain);
  if (answered && !silent && reply && row.data.deliver && !isSubagentRequester(host)) {
    const route = recordedRoute(host);
    if (route) queueDelivery(host, { kind: "reply", route, message: reply, idempotencyKey: `reply:${run.runId}` });
  }
  if (!answered) announceDirectly(host, id, now);
  moveFlowRow(host.sql, id, answered ? "done" : "fallback", { now });
  // A yielded sub-agent's own announce waited for this turn (src/spawn/subagent-lifecycle.ts): it reports it now.
  resumeDeferredAnnouncesIfIdle(host);
}

/**
 * The batch could not speak for its children: each batched completion is told as its direct announce (once: keyed).
 * A batch holds at most MAX_BATCH_CHILDREN completions, so one read takes them all.
 */
function announceDirectly(host: SessionHost, batchId: string, now: number): void {
  const rows = host.sql
    .exec<{ id: string; json: string }>(
      "SELECT id, json FROM flows WHERE kind = ? AND state = 'batched' AND json_extract(json, '$.batch') = ? LIMIT ?",
      ANNOUNCE_IN_FLOW,
      batchId,
      MAX_BATCH_CHILDREN,
    )
    .toArray();
  for (const r of rows) {
    const e = JSON.parse(r.json) as BatchedEvent;
    if (e.message)
      recordDirectAnnounce(host, {
        idempotencyKey: r.id,
        childKey: e.childKey,
        message: e.message,
        route: e.route ?? null,
        threadId: e.threadId,
      });
    moveFlowRow(host.sql, r.id, "fallback", { now });
  }
}

/** The batch's children with what their slots recorded, in creation order. */
function settledChildren(host: SessionHost, b: YieldBatch): SettledChild[] {
  const slots = new Map(
    host.sql
      .exec<{ id: string; state: string; json: string }>(
        "SELECT id, state, json FROM flows WHERE kind = ? AND id IN (SELECT value FROM json_each(?))",
        CHILD_FLOW,
        slotIds(b),
      )
      .toArray()
      .map((r) => [childKeyOfFlowId(r.id), r]),
  );
  const missing = new Set(b.missing ?? []);
  return b.children.map((childKey) => {
    const s = slots.get(childKey);
    const j = s ? (JSON.parse(s.json) as { label?: string; outcome?: ChildOutcome }) : {};
    return {
      childKey,
      ...(j.label ? { task: j.label } : {}),
      outcome: s?.state === "ended" ? (j.outcome ?? null) : null,
      ...(missing.has(childKey) ? { missing: true } : {}),
    };
  });
}

function markResuming(host: SessionHost, id: string, resumeRunId: string): void {
  const row = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  if (row?.state !== "settled") return;
  moveFlowRow(host.sql, id, "resuming", { data: { ...row.data, resumeRunId }, from: "settled" });
  endYieldTaskResumed(host, row.data, resumeRunId);
  host.timers.clear(YIELD_TIMER, id);
  host.timers.clear(YIELD_TIMER, id + GIVE_UP);
}

/** Queue the resume turn. Idempotent on the batch: a re-run after an eviction finds the run it queued. */
async function startResume(host: SessionHost, id: string, b: YieldBatch): Promise<void> {
  const waitedMs = b.waitingSince ? Date.now() - b.waitingSince : 0;
  const timeoutSeconds = host.meta?.subagent?.runTimeoutSeconds;
  const key = resumeKey(id);
  const snap = await host.enqueue(
    {
      input: {
        kind: "subagent_completion",
        message: formatSettlement(settledChildren(host, b), { waitedMs }),
        provenance: {
          kind: "internal_system",
          sourceSessionKey: b.children[0] ?? host.key,
          sourceTool: "sessions_yield",
        },
        // Delivered by this module when the turn ends (resumeEnded), never by the outbox's reply path.
        deliver: false,
        // A yielded sub-agent's continuation keeps the run deadline it was spawned with.
        ...(timeoutSeconds ? { timeoutSeconds } : {}),
        data: { yieldBatch: id },
      },
      idempotencyKey: key,
    },
    (h) => {
      const run = h.sql.exec<{ id: string }>("SELECT id FROM runs WHERE idempotency_key = ?", key).one();
      markResuming(h, id, run.id);
    },
  );
  // The run already existed (a re-run after an eviction between the enqueue and its answer): the batch moves now.
  host.storage.transactionSync(() => markResuming(host, id, snap.runId));
}

async function onTimer(host: SessionHost, timer: TimerRow): Promise<void> {
  const giveUp = timer.ref.endsWith(GIVE_UP);
  const id = giveUp ? timer.ref.slice(0, -GIVE_UP.length) : timer.ref;
  const row = host.meta ? getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW) : null;
  if (!row || (row.state !== "waiting" && row.state !== "settled")) {
    host.timers.clear(YIELD_TIMER, timer.ref);
    return;
  }
  if (row.state === "waiting") {
    // The give-up, or a batch row's timer while waiting (a re-check written before slot ends settled batches,
    // or the audit's repair): settle if ready, and nothing more — a slot's end settles it, nothing polls.
    const settled = host.storage.transactionSync(() => {
      if (settleIfReady(host, id, row.data, Date.now(), giveUp)) return true;
      host.timers.clear(YIELD_TIMER, timer.ref);
      return false;
    });
    if (!settled) return;
  } else if (giveUp) host.timers.clear(YIELD_TIMER, timer.ref);
  const now = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  if (now?.state === "settled") await startResume(host, id, now.data);
}

/** The batch's timer gave up (docs/timers.md): its children's completions are told directly, the batch ends `failed`. */
function batchGaveUp(host: SessionHost, dead: DeadTimer): void {
  const id = dead.ref.endsWith(GIVE_UP) ? dead.ref.slice(0, -GIVE_UP.length) : dead.ref;
  const row = getFlowRow<YieldBatch>(host.sql, id, YIELD_FLOW);
  if (row?.state !== "waiting" && row?.state !== "settled") return;
  const now = Date.now();
  announceDirectly(host, id, now);
  moveFlowRow(host.sql, id, "failed", { now });
  endYieldTaskFailed(host, row.data);
  host.timers.clear(YIELD_TIMER, id);
  host.timers.clear(YIELD_TIMER, id + GIVE_UP);
  resumeDeferredAnnouncesIfIdle(host);
}

/** The sweeper's audit (src/session/run-audit.ts): each open batch and what moves it on. */
function auditBatches(host: SessionHost): FlowFinding[] {
  return openBatches(host).map(({ id, state, batch }) => {
    if (state === "claimed") return { flow: id, state, guard: "yielding run" };
    if (state === "resuming") return { flow: id, state, guard: "resume run" };
    if (state === "settled") return timerGuard(host, id, state, YIELD_TIMER, id);
    // Waiting: its children's slot ends settle it, its give-up timer bounds it. A lost give-up is set again at
    // the batch's own deadline, never now (that would end the wait early).
    const ref = id + GIVE_UP;
    if (host.timers.get(YIELD_TIMER, ref)) return { flow: id, state, guard: YIELD_TIMER };
    if (host.sql.exec("SELECT 1 FROM dead_timers WHERE kind = ? AND ref = ?", YIELD_TIMER, ref).toArray().length > 0)
      return { flow: id, state, guard: `${YIELD_TIMER} (dead)` };
    host.timers.set(YIELD_TIMER, ref, batch.giveUpAt ?? Date.now());
    return { flow: id, state, guard: YIELD_TIMER, repaired: true };
  });
}

/** The claim, in this (the caller's) object; and a child's task run, for its parent's `already_pending`. */
const yieldRpc = {
  claim: async (host: SessionHost, arg: ClaimArgs): Promise<ClaimResult> => {
    if (!host.hasStorage || !host.meta) return { status: "error", error: NOT_SUPPORTED };
    const res = host.storage.transactionSync(() => claimSync(host, arg));
    await host.timers.arm();
    return res;
  },
  taskRun: (host: SessionHost): { runId: string | null; paused: boolean } => {
    if (!host.hasStorage || !host.meta) return { runId: null, paused: false };
    const run = host.sql
      .exec<{ id: string }>("SELECT id FROM runs WHERE idempotency_key = ?", SUBAGENT_TASK_IDEMPOTENCY_KEY)
      .toArray()[0];
    const batch = run ? getFlowRow(host.sql, batchIdOf(run.id), YIELD_FLOW) : null;
    return { runId: run?.id ?? null, paused: Boolean(batch && OPEN_BATCH_STATES.includes(batch.state as never)) };
  },
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "subagent-yield": typeof yieldRpc;
  }
}

export const yieldBatchExtension: SessionExtension = {
  name: YIELD_EXTENSION,
  onRunEnded,
  audit: auditBatches,
  rpc: yieldRpc,
  finishedFlows: { [YIELD_FLOW]: ["done", "fallback", "failed"] },
  // Not retryable: its death already told every child's completion directly.
  timers: { [YIELD_TIMER]: { onDead: batchGaveUp } },
  onTimer,
};

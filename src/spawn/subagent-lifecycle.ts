import { log } from "../log";
import { transcriptPathOf } from "../registry/row";
import type { FlowFinding } from "../session/audit-types";
import { capText } from "../session/byte-budget";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import { timerGuard } from "../session/run-audit";
import type { RunEndedEvent } from "../session/run-types";
import type { SubagentInfo } from "../session/types";
import { reportTaskSync } from "../tasks/task-report";
import {
  ANNOUNCE_FLOW,
  ANNOUNCE_TIMER,
  ANNOUNCE_TIMER_KINDS,
  type AnnounceMaterial,
  announcedOutcome,
  DESCENDANTS_TIMER,
  type FlowState,
  flowAt,
  HANDOFF_TIMER,
  readFlow,
  resumeDeferredAnnounces,
  writeFlow,
} from "./announce-flow";
import {
  type ChildFinding,
  formatSubagentAnnounce,
  freezeResult as freeze,
  isSilentToken,
  type SubagentAnnounceInput,
} from "./announce-format";
import { ARCHIVE_TIMER, DELETE_TIMER, removeChild } from "./child-removal";
import { countActiveChildren, directChildResults } from "./child-slots";
import { listAttachments, readAttachment } from "./child-spawn";
import { completionEventOf } from "./completion-event";
import { announceIdempotencyKey } from "./direct-announce";
import { handAnnounceToRequester, releaseChildSlot } from "./requester-side";
import { latestSynthesis } from "./requester-turn";
import { ANNOUNCE_STEP_MESSAGE, subagentAnnouncePrompt } from "./subagent-prompt";
import { costOf, latestToolResultText, outcomeOf, partialProgressOf } from "./task-outcome";
import { yieldPending } from "./yield-rows";

/**
 * The child's half of the sub-agent lifecycle (docs/contract.md, "Flows"; test/spawn/subagent-announce.test.ts),
 * driven only by rows written in the transactions that cause them, so an eviction at any point
 * loses nothing:
 *
 *   task run ends (ok | timeout | error)  → flow row + `subagent-announce` timer   (run-ending transaction)
 *     … while own children still run      → flow row "waiting" + `subagent-descendants` cap timer;
 *                                            the last child's announce moves it on (same transaction)
 *   timer                                 → announce-step run queued in the child   (idempotent enqueue)
 *   announce run ends                     → announce text (or silence) + `subagent-handoff` timer
 *   timer                                 → RPC into the requester (idempotent there), retried with backoff
 *   hand-off acknowledged                 → `subagent-delete` timer (cleanup "delete")
 *   N minutes after the child's last run  → `subagent-archive` timer: export to R2, clear, leave the index
 *
 * Status comes from the task run's outcome, never from model text; the announce step only adds Notes.
 * The flow row and its timers: announce-flow.ts; archive and delete: child-removal.ts.
 */

export const LIFECYCLE_EXTENSION = "subagent-lifecycle" as const;
/**
 * A parent waits this long at most for its own children before announcing without the missing ones
 * (they are listed as still running). Children end by their own deadlines well before this; the cap
 * only guarantees that nothing waits forever on a child that never reports.
 */
export const DESCENDANT_WAIT_MAX_MS = 6 * 60 * 60_000;
/** Open announce flows audited per sweep (src/session/run-audit.ts). */
const AUDITED_FLOWS = 20;
const announceStepKey = (taskRunId: string) => `subagent:announce:${taskRunId}`;

/** What all direct children's results together may take in the announce material. */
const CHILD_RESULTS_MAX_BYTES = 100 * 1024;

/** Inside the run-ending transaction of the child. */
function onRunEnded(host: SessionHost, { run, input }: RunEndedEvent): void {
  const sub = host.meta?.subagent;
  if (!sub) return;
  const now = Date.now();
  if (input.kind === "subagent_task") {
    const outcome = outcomeOf(run.status);
    // Cancelled (src/tasks/task-cancel.ts): its children are cancelled too, and nobody asked for notes, so the
    // announce goes out at once without the model step: the parent is told once, by the usual hand-off.
    const cancelled = sub.cancelled !== undefined && run.status === "aborted";
    sub.status = cancelled
      ? "killed"
      : outcome === "ok"
        ? "done"
        : outcome === "timeout" || outcome === "lost"
          ? outcome
          : "failed";
    sub.outcome = run.status;
    sub.runId = run.runId;
    sub.startedAt = sub.startedAt ?? run.startedAt;
    sub.endedAt = run.endedAt ?? now;
    host.saveMeta();
    const usage = { input: run.usage?.input ?? 0, output: run.usage?.output ?? 0 };
    const finalReply = freeze(run.status === "ok" ? (run.reply ?? null) : null);
    const latestToolResult = latestToolResultText(host, run.runId);
    const fallback =
      !finalReply?.trim() && outcome === "timeout"
        ? (partialProgressOf(host, run.runId, latestToolResult) ?? latestToolResult)
        : latestToolResult;
    // Its own children still run: announcing now would report their work as missing, so the
    // announce waits for their announces (test/spawn/subagent-descendants.test.ts), bounded by a cap timer.
    // A task that yielded (sessions_yield) is paused the same way: its announce reports the resumed turn.
    const waitForChildren = !cancelled && (countActiveChildren(host) > 0 || yieldPending(host));
    const material: AnnounceMaterial = {
      taskRunId: run.runId,
      outcome: cancelled ? "cancelled" : outcome,
      ...(cancelled ? { error: sub.cancelled?.reason } : run.error ? { error: run.error } : {}),
      finalReply,
      fallbackResult: freeze(fallback),
      taskStartedAt: run.startedAt ?? sub.startedAt ?? now,
      taskEndedAt: run.endedAt ?? now,
      ...(waitForChildren ? { deferred: true } : {}),
      runtimeMs: run.startedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.startedAt : undefined,
      usage,
      costUsd: costOf(host, run.model, usage),
    };
    if (cancelled) {
      material.message = formatSubagentAnnounce(announceInputOf(host, material, ""));
      writeFlow(host, "handoff", material);
      host.timers.set(HANDOFF_TIMER, run.runId, now);
    } else {
      writeFlow(host, waitForChildren ? "waiting" : "step", material);
      if (waitForChildren) host.timers.set(DESCENDANTS_TIMER, run.runId, now + DESCENDANT_WAIT_MAX_MS);
      else host.timers.set(ANNOUNCE_TIMER, run.runId, now);
    }
  } else if (input.kind === "subagent_announce") {
    const taskRunId = String(input.data?.taskRunId ?? "");
    const flow = readFlow(host, taskRunId);
    if (flow?.state !== "step") return;
    // A failed or timed-out announce step still announces (without notes): the outcome must reach the requester.
    const m = flow.material;
    const reply = run.status === "ok" ? (run.reply ?? "") : "";
    // After waiting for its children, NO_REPLY ("nothing to add") must not swallow their results: it
    // falls back to announcing without notes, as OpenClaw does; ANNOUNCE_SKIP stays explicit silence.
    const silent = isSilentToken(reply, "ANNOUNCE_SKIP") || (isSilentToken(reply, "NO_REPLY") && !m.deferred);
    const notes = isSilentToken(reply, "NO_REPLY") ? "" : reply;
    const announce = announceInputOf(host, m, notes);
    m.message = silent ? null : formatSubagentAnnounce(announce);
    // "requester" delivery: the requester runs a turn on this event; the message above is its fallback.
    if (!silent && sub.announceDelivery === "requester")
      m.event = completionEventOf(announce, sub.label?.trim() || sub.task);
    writeFlow(host, "handoff", m);
    host.timers.set(HANDOFF_TIMER, taskRunId, now);
  }
  // Kept run-mode children are archived N minutes after their last run. A thread-bound (mode "session")
  // child is never archived: its spawn note says it stays for follow-ups in its thread, and OpenClaw never
  // arms its archive either (test/spawn/subagent-archive.test.ts).
  const archiveMinutes = host.cfg.agents.defaults.subagents.archiveAfterMinutes;
  if (sub.cleanup === "keep" && sub.mode !== "session" && archiveMinutes > 0)
    host.timers.set(ARCHIVE_TIMER, "child", now + archiveMinutes * 60_000);
}

/** The announce's input from the frozen material (the step's notes, or none). */
function announceInputOf(host: SessionHost, m: AnnounceMaterial, notes: string): SubagentAnnounceInput {
  return {
    outcome: m.outcome,
    error: m.error,
    finalReply: m.finalReply,
    latestToolResult: m.fallbackResult,
    children: m.children,
    notes,
    runtimeMs: m.runtimeMs,
    usage: m.usage,
    costUsd: m.costUsd,
    sessionKey: host.meta!.key,
    sessionId: host.meta!.sessionId,
    transcriptPath: transcriptPathOf(host.meta!.key),
  };
}

/**
 * The children as the flow row keeps them: their results share one frozen Result's size (each child's
 * alone may be 100 KB), so an orchestrator of many children still fits one row (docs/limits.md).
 */
function shareChildResults(children: ChildFinding[]): ChildFinding[] {
  const share = Math.max(256, Math.floor(CHILD_RESULTS_MAX_BYTES / children.length));
  return children.map((c) =>
    c.outcome ? { ...c, outcome: { ...c.outcome, result: capText(c.outcome.result, share) } } : c,
  );
}

/** Queue the announce step. Idempotent on the task run, so a timer re-run after an eviction finds the same run. */
async function startAnnounceStep(host: SessionHost, taskRunId: string): Promise<void> {
  const at = flowAt(host, taskRunId, "step", ANNOUNCE_TIMER);
  if (!at) return;
  const { material: m, sub } = at;
  // Fixed once and stored before the step is queued, so the step's prompt and the announce it ends
  // in (formatted from the stored row) describe the same children.
  if (!m.children) {
    const children = directChildResults(host, m.taskStartedAt, m.taskEndedAt);
    if (children.length > 0) {
      m.children = shareChildResults(children);
      // A parent that heard its children as turns ("requester" delivery) reports its synthesis as its result.
      const synthesis = m.deferred ? latestSynthesis(host, m.taskEndedAt) : null;
      if (synthesis) m.finalReply = freeze(synthesis);
      writeFlow(host, "step", m);
    }
  }
  const announceTimeoutMs = host.cfg.agents.defaults.subagents.announceTimeoutMs;
  await host.enqueue({
    input: {
      kind: "subagent_announce",
      message: ANNOUNCE_STEP_MESSAGE,
      provenance: { kind: "internal_system", sourceSessionKey: sub.requesterKey, sourceTool: "sessions_spawn" },
      extraSystemPrompt: subagentAnnouncePrompt({
        requesterKey: sub.requesterKey,
        requesterChannel: sub.requesterChannel,
        childKey: host.key,
        task: sub.task,
        ...announcedOutcome(m),
        deferred: m.deferred === true,
      }),
      timeoutSeconds: Math.max(1, Math.ceil(announceTimeoutMs / 1000)),
      deliver: false,
      data: { taskRunId },
    },
    idempotencyKey: announceStepKey(taskRunId),
  });
  host.timers.clear(ANNOUNCE_TIMER, taskRunId);
}

/**
 * Hand the announce to the requester's object. A throw (requester unreachable, eviction) leaves the
 * timer in place and the alarm retries it with backoff; the requester de-duplicates on the key.
 */
async function handOff(host: SessionHost, taskRunId: string): Promise<void> {
  const at = flowAt(host, taskRunId, "handoff", HANDOFF_TIMER);
  if (!at) return;
  const { material: m, sub } = at;
  const res = await handAnnounceToRequester(host.bindings, sub.requesterKey, {
    idempotencyKey: announceIdempotencyKey(host.key, taskRunId),
    childKey: host.key,
    childRunId: taskRunId,
    message: m.message ?? null,
    route: sub.requesterRoute ?? null,
    ...(sub.thread ? { threadId: sub.thread.threadId } : {}),
    // Kept by the requester even for a silent announce: a parent sub-agent reports all its children.
    outcome: announcedOutcome(m),
    ...(m.event ? { delivery: "requester" as const, event: m.event } : {}),
  });
  if (res.requesterGone)
    log.warn("subagent_announce_dropped", {
      sessionKey: host.key,
      requesterKey: sub.requesterKey,
      reason: "the requester session no longer exists",
    });
  host.storage.transactionSync(() => {
    writeFlow(host, "done", m);
    host.timers.clear(HANDOFF_TIMER, taskRunId);
    // The task's delivery, in the requester's ledger (docs/tasks.md): with it, or waiting for its completion turn.
    reportTaskSync(host, {
      deliveryStatus: res.requesterGone ? "parent_missing" : res.turnQueued ? "session_queued" : "delivered",
    });
    // "delete" removes the child only once its announce is safely with the requester.
    if (sub.cleanup === "delete") host.timers.set(DELETE_TIMER, "child", Date.now());
  });
}
/**
 * The sweeper's audit of this child's open announce flows: "waiting" is moved on by its cap timer, "step" by
 * its announce run once queued (before that, by its timer), "handoff" by the hand-off timer.
 */
function auditAnnounces(host: SessionHost): FlowFinding[] {
  const rows = host.sql
    .exec<{ id: string; state: FlowState }>(
      "SELECT id, state FROM flows WHERE kind = ? AND state IN ('waiting', 'step', 'handoff') LIMIT ?",
      ANNOUNCE_FLOW,
      AUDITED_FLOWS,
    )
    .toArray();
  return rows.map(({ id, state }) => {
    const taskRunId = id.slice("announce:".length);
    if (state === "step") {
      const step = host.sql
        .exec<{ status: string }>("SELECT status FROM runs WHERE idempotency_key = ?", announceStepKey(taskRunId))
        .toArray()[0];
      if (step && (step.status === "queued" || step.status === "running"))
        return { flow: id, state, guard: "announce run" };
    }
    const kind = state === "waiting" ? DESCENDANTS_TIMER : state === "step" ? ANNOUNCE_TIMER : HANDOFF_TIMER;
    return timerGuard(host, id, state, kind, taskRunId);
  });
}

/**
 * Whether this child may still announce to its requester: its task or announce run is open, or its announce
 * flow has a step to go. False once the announce was handed off — or can no longer be (its flow failed): the
 * requester's slot check then frees the slot (src/spawn/requester-side.ts).
 */
function announcePending(host: SessionHost): { pending: boolean } {
  if (!host.hasStorage || !host.meta?.subagent) return { pending: false };
  const run = host.sql
    .exec(
      "SELECT 1 FROM runs WHERE kind IN ('subagent_task', 'subagent_announce') AND status IN ('queued', 'running') LIMIT 1",
    )
    .toArray();
  const flow = host.sql
    .exec("SELECT 1 FROM flows WHERE kind = ? AND state IN ('waiting', 'step', 'handoff') LIMIT 1", ANNOUNCE_FLOW)
    .toArray();
  return { pending: run.length > 0 || flow.length > 0 };
}

/** The child's spawn attachments, for its runs (GET /v1/sessions/{key}/attachments[/{name}]); whether its announce may still come. */
const lifecycleRpc = {
  attachments: (host: SessionHost) => listAttachments(host),
  attachment: (host: SessionHost, name: string) => readAttachment(host, String(name)),
  announcePending: (host: SessionHost) => announcePending(host),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "subagent-lifecycle": typeof lifecycleRpc;
  }
}

/** The child's side of a sub-agent: its announce, the hand-off to its requester, archive and delete. */
export const subagentLifecycleExtension: SessionExtension = {
  name: LIFECYCLE_EXTENSION,
  finishedFlows: { [ANNOUNCE_FLOW]: ["done", "failed"] },
  onRunEnded,
  audit: auditAnnounces,
  rpc: lifecycleRpc,
  timers: { ...ANNOUNCE_TIMER_KINDS, [ARCHIVE_TIMER]: {}, [DELETE_TIMER]: {}, [DESCENDANTS_TIMER]: {} },
  async onTimer(host, timer) {
    switch (timer.kind) {
      case ANNOUNCE_TIMER:
        return startAnnounceStep(host, timer.ref);
      case HANDOFF_TIMER:
        return handOff(host, timer.ref);
      case ARCHIVE_TIMER:
        return removeChild(host, timer, true);
      case DELETE_TIMER:
        return removeChild(host, timer, false);
      case DESCENDANTS_TIMER:
        // The cap: announce now; children still running are reported as such.
        host.storage.transactionSync(() => {
          // Cleared by ref too: a timer whose flow is no longer waiting must not fire forever.
          host.timers.clear(DESCENDANTS_TIMER, timer.ref);
          resumeDeferredAnnounces(host);
        });
    }
  },
  async beforeDelete(host) {
    // A child deleted before its announce was handed off would hold a requester slot until the
    // requester's slot check notices; free it now (best effort: the check remains the guarantee).
    const sub: SubagentInfo | undefined = host.meta?.subagent;
    if (sub?.status !== "running") return;
    try {
      await releaseChildSlot(host.bindings, sub.requesterKey, host.key);
    } catch (err) {
      log.warn("subagent_slot_release_failed", { sessionKey: host.key, error: err });
    }
  },
};

import { log } from "../log";
import { transcriptPathOf } from "../registry/row";
import { capText } from "../session/byte-budget";
import { beginClosing } from "../session/closing";
import { registerSessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunEndedEvent } from "../session/run-types";
import { type DeadTimer, defineTimerKind } from "../session/timer-policy";
import type { TimerRow } from "../session/timers";
import type { SubagentInfo } from "../session/types";
import {
  announceResult,
  type ChildFinding,
  type ChildOutcome,
  formatSubagentAnnounce,
  freezeResult as freeze,
  isSilentToken,
  type RunOutcome,
  type SubagentAnnounceInput,
  statusLabel,
} from "./announce-format";
import { archivedEntryOf, exportToArchive } from "./archive";
import { countActiveChildren, directChildResults, onChildrenSettled } from "./child-slots";
import { listAttachments, readAttachment } from "./child-spawn";
import { type CompletionEvent, completionEventOf } from "./completion-event";
import { announceIdempotencyKey } from "./direct-announce";
import { handAnnounceToRequester, releaseChildSlot } from "./requester-side";
import { latestSynthesis } from "./requester-turn";
import { ANNOUNCE_STEP_MESSAGE, subagentAnnouncePrompt } from "./subagent-prompt";
import { costOf, latestToolResultText, outcomeOf, partialProgressOf } from "./task-outcome";

/**
 * The child's half of the sub-agent lifecycle (docs/contract.md, "Flows"; test/subagent-announce.test.ts),
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
 */

export const LIFECYCLE_EXTENSION = "subagent-lifecycle" as const;
const ANNOUNCE_FLOW = "subagent_announce_out";
export const ANNOUNCE_TIMER = "subagent-announce";
export const HANDOFF_TIMER = "subagent-handoff";
export const ARCHIVE_TIMER = "subagent-archive";
export const DELETE_TIMER = "subagent-delete";
export const DESCENDANTS_TIMER = "subagent-descendants";
/**
 * A parent waits this long at most for its own children before announcing without the missing ones
 * (they are listed as still running). Children end by their own deadlines well before this; the cap
 * only guarantees that nothing waits forever on a child that never reports.
 */
export const DESCENDANT_WAIT_MAX_MS = 6 * 60 * 60_000;
/** What all direct children's results together may take in the announce material. */
const CHILD_RESULTS_MAX_BYTES = 100 * 1024;
/** Archival waits this long again while an announce is still on its way or a run is active. */
const ARCHIVE_RETRY_MS = 60_000;

/** What the announce needs, frozen when the task run ends (state of the flow row `announce:<taskRunId>`). */
interface AnnounceMaterial {
  taskRunId: string;
  outcome: RunOutcome;
  error?: string;
  finalReply: string | null;
  /** Result when the final reply is empty: partial progress (timeout amid tool calls) or the latest tool result. */
  fallbackResult: string | null;
  taskStartedAt: number;
  taskEndedAt: number;
  /** The task ended while its own children still ran; the announce waited for them. */
  deferred?: boolean;
  /** Direct children spawned during the task run, in creation order (fixed when the announce step starts). */
  children?: ChildFinding[];
  runtimeMs?: number;
  usage: { input: number; output: number };
  costUsd: number | null;
  /** Set when the announce step ended: the text to hand off, or null for silence. */
  message?: string | null;
  /** State "failed": the timer that gave up (listed under GET /v1/sessions/{key}/timers/dead) and why. */
  failure?: { timer: string; attempts: number; error: string };
  /** Set with `message` in "requester" delivery: the completion event the requester's turn runs on. */
  event?: CompletionEvent;
}

/** Status and Result of the announce, as the step's prompt and the hand-off to the requester see them. */
function announcedOutcome(m: AnnounceMaterial): ChildOutcome {
  return {
    status: statusLabel(m.outcome, m.error),
    result: announceResult({ finalReply: m.finalReply, latestToolResult: m.fallbackResult, children: m.children }),
  };
}

type FlowState = "waiting" | "step" | "handoff" | "done" | "failed";
const flowId = (taskRunId: string) => `announce:${taskRunId}`;

function readFlow(host: SessionHost, taskRunId: string): { state: FlowState; material: AnnounceMaterial } | null {
  const r = host.sql
    .exec<{ state: FlowState; json: string }>("SELECT state, json FROM flows WHERE id = ?", flowId(taskRunId))
    .toArray()[0];
  return r ? { state: r.state, material: JSON.parse(r.json) as AnnounceMaterial } : null;
}

function writeFlow(host: SessionHost, state: FlowState, m: AnnounceMaterial): void {
  const now = Date.now();
  host.sql.exec(
    `INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET state = excluded.state, json = excluded.json, updated_at = excluded.updated_at`,
    flowId(m.taskRunId),
    ANNOUNCE_FLOW,
    state,
    JSON.stringify(m),
    now,
    now,
  );
}

/** Inside the run-ending transaction of the child. */
function onRunEnded(host: SessionHost, { run, input }: RunEndedEvent): void {
  const sub = host.meta?.subagent;
  if (!sub) return;
  const now = Date.now();
  if (input.kind === "subagent_task") {
    const outcome = outcomeOf(run.status);
    sub.status = outcome === "ok" ? "done" : outcome === "timeout" ? "timeout" : "failed";
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
    // announce waits for their announces (test/subagent-descendants.test.ts), bounded by a cap timer.
    const waitForChildren = countActiveChildren(host) > 0;
    writeFlow(host, waitForChildren ? "waiting" : "step", {
      taskRunId: run.runId,
      outcome,
      ...(run.error ? { error: run.error } : {}),
      finalReply,
      fallbackResult: freeze(fallback),
      taskStartedAt: run.startedAt ?? sub.startedAt ?? now,
      taskEndedAt: run.endedAt ?? now,
      ...(waitForChildren ? { deferred: true } : {}),
      runtimeMs: run.startedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.startedAt : undefined,
      usage,
      costUsd: costOf(host, run.model, usage),
    });
    if (waitForChildren) host.timers.set(DESCENDANTS_TIMER, run.runId, now + DESCENDANT_WAIT_MAX_MS);
    else host.timers.set(ANNOUNCE_TIMER, run.runId, now);
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
    const announce: SubagentAnnounceInput = {
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
    m.message = silent ? null : formatSubagentAnnounce(announce);
    // "requester" delivery: the requester runs a turn on this event; the message above is its fallback.
    if (!silent && sub.announceDelivery === "requester")
      m.event = completionEventOf(announce, sub.label?.trim() || sub.task);
    writeFlow(host, "handoff", m);
    host.timers.set(HANDOFF_TIMER, taskRunId, now);
  }
  // Kept children are archived N minutes after their last run (any run: a thread-bound child stays while used).
  const archiveMinutes = host.cfg.agents.defaults.subagents.archiveAfterMinutes;
  if (sub.cleanup === "keep" && archiveMinutes > 0)
    host.timers.set(ARCHIVE_TIMER, "child", now + archiveMinutes * 60_000);
}

/**
 * The flow a lifecycle timer acts on, when it is still in the state the timer was set for; otherwise
 * the timer is stale (the flow moved on, or the session lost its sub-agent info) and is cleared.
 */
function flowAt(
  host: SessionHost,
  taskRunId: string,
  state: FlowState,
  timerKind: string,
): { material: AnnounceMaterial; sub: SubagentInfo } | null {
  const flow = readFlow(host, taskRunId);
  const sub = host.meta?.subagent;
  if (!flow || flow.state !== state || !sub) {
    host.timers.clear(timerKind, taskRunId);
    return null;
  }
  return { material: flow.material, sub };
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
    idempotencyKey: `subagent:announce:${taskRunId}`,
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
    // "delete" removes the child only once its announce is safely with the requester.
    if (sub.cleanup === "delete") host.timers.set(DELETE_TIMER, "child", Date.now());
  });
}

function busy(host: SessionHost): boolean {
  // A failed announce is not "on its way": it waits for an operator retry, which archival must not block.
  const pendingFlow =
    host.sql
      .exec("SELECT id FROM flows WHERE kind = ? AND state NOT IN ('done', 'failed') LIMIT 1", ANNOUNCE_FLOW)
      .toArray().length > 0;
  const activeRun =
    host.sql.exec("SELECT id FROM runs WHERE status IN ('queued', 'running') LIMIT 1").toArray().length > 0;
  return pendingFlow || activeRun;
}

/** Archive (keep) or delete (cleanup "delete") the child: from its own alarm, so it survives restarts. */
async function removeChild(host: SessionHost, timer: TimerRow, archive: boolean): Promise<void> {
  // Already removed by a concurrent alarm pass: its storage (this timer included) is gone.
  if (!host.meta) return;
  const sub = host.meta.subagent;
  if (!sub) {
    host.timers.clear(timer.kind, timer.ref);
    return;
  }
  // Never drop an announce still on its way (or a run in progress): try again shortly.
  if (busy(host)) {
    host.timers.set(timer.kind, timer.ref, Date.now() + ARCHIVE_RETRY_MS);
    return;
  }
  // No archive bucket: the session's storage is its only copy, so it is kept (GET /healthz tells the operator).
  if (archive && !host.bindings.ARCHIVE) {
    host.timers.clear(timer.kind, timer.ref);
    log.warn("subagent_archive_skipped", {
      sessionKey: host.key,
      reason: "no ARCHIVE bucket is bound; the session is kept",
    });
    return;
  }
  // Closed synchronously after the checks above (no await since): a message arriving during the export is refused (409),
  // never accepted and then cleared with the storage (session/closing.ts). A failed export reopens it.
  const release = beginClosing(host, archive ? "archived" : "deleted");
  try {
    // Only kept children are archived (deleted ones take the DELETE_TIMER path); the index keeps an archived row.
    const archivedAs =
      archive &&
      (await exportToArchive(host, {
        retainAttachments: host.cfg.tools.sessions_spawn.attachments.retainOnSessionKeep,
      }))
        ? archivedEntryOf(host)
        : undefined;
    // deleteSession clears every table (attachments included), the alarm and the registry row (or marks it archived).
    await host.deleteSession(archivedAs ? { archivedAs } : {});
  } finally {
    release();
  }
}

/**
 * Move announces that waited for this session's children on to their announce step. Runs inside the
 * transaction that ended the last child's slot (or from the cap timer), so the step cannot be lost.
 */
function resumeDeferredAnnounces(host: SessionHost): void {
  const waiting = host.sql
    .exec<{ json: string }>("SELECT json FROM flows WHERE kind = ? AND state = 'waiting'", ANNOUNCE_FLOW)
    .toArray();
  for (const r of waiting) {
    const m = JSON.parse(r.json) as AnnounceMaterial;
    writeFlow(host, "step", m);
    host.timers.clear(DESCENDANTS_TIMER, m.taskRunId);
    host.timers.set(ANNOUNCE_TIMER, m.taskRunId, Date.now());
  }
}

onChildrenSettled(resumeDeferredAnnounces);

/** The state each announce timer drives; its death leaves the flow "failed" and an operator retry puts it back. */
const ANNOUNCE_TIMER_STATES: Record<string, FlowState> = { [ANNOUNCE_TIMER]: "step", [HANDOFF_TIMER]: "handoff" };

function announceGaveUp(host: SessionHost, dead: DeadTimer): void {
  const flow = readFlow(host, dead.ref);
  if (!flow || flow.state !== ANNOUNCE_TIMER_STATES[dead.kind]) return;
  writeFlow(host, "failed", {
    ...flow.material,
    failure: { timer: dead.kind, attempts: dead.attempts, error: dead.lastError },
  });
}

function reviveAnnounce(host: SessionHost, dead: DeadTimer): boolean {
  const flow = readFlow(host, dead.ref);
  if (flow?.state !== "failed" || flow.material.failure?.timer !== dead.kind) return false;
  const { failure: _failure, ...material } = flow.material;
  writeFlow(host, ANNOUNCE_TIMER_STATES[dead.kind], material);
  return true;
}

defineTimerKind<SessionHost>(ANNOUNCE_TIMER, { onDead: announceGaveUp, revive: reviveAnnounce });
// The requester may be busy or restarting for a while: about an hour of attempts before the hand-off gives up.
defineTimerKind<SessionHost>(HANDOFF_TIMER, {
  policy: { maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 10 * 60_000 },
  onDead: announceGaveUp,
  revive: reviveAnnounce,
});

/** The child's spawn attachments, for its runs (GET /v1/sessions/{key}/attachments[/{name}]). */
const lifecycleRpc = {
  attachments: (host: SessionHost) => listAttachments(host),
  attachment: (host: SessionHost, name: string) => readAttachment(host, String(name)),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "subagent-lifecycle": typeof lifecycleRpc;
  }
}

registerSessionExtension({
  name: LIFECYCLE_EXTENSION,
  finishedFlows: { [ANNOUNCE_FLOW]: ["done", "failed"] },
  onRunEnded,
  rpc: lifecycleRpc,
  async onTimer(host, timer) {
    switch (timer.kind) {
      case ANNOUNCE_TIMER:
        await startAnnounceStep(host, timer.ref);
        return true;
      case HANDOFF_TIMER:
        await handOff(host, timer.ref);
        return true;
      case ARCHIVE_TIMER:
        await removeChild(host, timer, true);
        return true;
      case DELETE_TIMER:
        await removeChild(host, timer, false);
        return true;
      case DESCENDANTS_TIMER:
        // The cap: announce now; children still running are reported as such.
        host.storage.transactionSync(() => {
          // Cleared by ref too: a timer whose flow is no longer waiting must not fire forever.
          host.timers.clear(DESCENDANTS_TIMER, timer.ref);
          resumeDeferredAnnounces(host);
        });
        return true;
      default:
        return false;
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
});

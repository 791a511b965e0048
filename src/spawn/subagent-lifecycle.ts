import { textOf } from "../runners/model-runner";
import { splitModelRef } from "../runners/models";
import { transcriptPathOf } from "../registry/row";
import { registerSessionExtension, type RunEndedEvent, type SessionObject } from "../session/session-object";
import type { TimerRow } from "../session/timers";
import type { SubagentInfo, TranscriptMessage } from "../session/types";
import { estimateCostUsd, formatSubagentAnnounce, isSilentToken, statusLabel, type RunOutcome } from "./announce-format";
import { exportToArchive } from "./archive";
import { listAttachments, readAttachment } from "./child-spawn";
import { announceIdempotencyKey, handAnnounceToRequester, releaseChildSlot } from "./requester-side";
import { ANNOUNCE_STEP_MESSAGE, subagentAnnouncePrompt } from "./subagent-prompt";

/**
 * The child's half of the sub-agent lifecycle (DESIGN §4 "sessions_spawn", reference §4.5–4.6),
 * driven only by rows written in the transactions that cause them, so an eviction at any point
 * loses nothing:
 *
 *   task run ends (ok | timeout | error)  → flow row + `subagent-announce` timer   (run-ending transaction)
 *   timer                                 → announce-step run queued in the child   (idempotent enqueue)
 *   announce run ends                     → announce text (or silence) + `subagent-handoff` timer
 *   timer                                 → RPC into the requester (idempotent there), retried with backoff
 *   hand-off acknowledged                 → `subagent-delete` timer (cleanup "delete")
 *   N minutes after the child's last run  → `subagent-archive` timer: export to R2, clear, leave the index
 *
 * Status comes from the task run's outcome, never from model text; the announce step only adds Notes.
 */

export const LIFECYCLE_EXTENSION = "subagent-lifecycle";
const ANNOUNCE_FLOW = "subagent_announce_out";
export const ANNOUNCE_TIMER = "subagent-announce";
export const HANDOFF_TIMER = "subagent-handoff";
export const ARCHIVE_TIMER = "subagent-archive";
export const DELETE_TIMER = "subagent-delete";
/** Archival waits this long again while an announce is still on its way or a run is active. */
const ARCHIVE_RETRY_MS = 60_000;

/** What the announce needs, frozen when the task run ends (state of the flow row `announce:<taskRunId>`). */
interface AnnounceMaterial {
  taskRunId: string;
  outcome: RunOutcome;
  error?: string;
  finalReply: string | null;
  latestToolResult: string | null;
  runtimeMs?: number;
  usage: { input: number; output: number };
  costUsd: number | null;
  announceRunId?: string;
  /** Set when the announce step ended: the text to hand off, or null for silence. */
  message?: string | null;
}

/** A child's result is frozen at this size (reference §4.5), so flow rows and deliveries stay bounded. */
const FROZEN_RESULT_MAX_CHARS = 100 * 1024;

function freeze(text: string | null): string | null {
  if (text === null || text.length <= FROZEN_RESULT_MAX_CHARS) return text;
  const kb = Math.round(new TextEncoder().encode(text).byteLength / 1024);
  return `${text.slice(0, FROZEN_RESULT_MAX_CHARS)}\n[truncated: frozen completion output exceeded 100KB (${kb}KB)]`;
}

type FlowState = "step" | "handoff" | "done";
const flowId = (taskRunId: string) => `announce:${taskRunId}`;

function readFlow(host: SessionObject, taskRunId: string): { state: FlowState; material: AnnounceMaterial } | null {
  const r = host.sql.exec<{ state: FlowState; json: string }>("SELECT state, json FROM flows WHERE id = ?", flowId(taskRunId)).toArray()[0];
  return r ? { state: r.state, material: JSON.parse(r.json) as AnnounceMaterial } : null;
}

function writeFlow(host: SessionObject, state: FlowState, m: AnnounceMaterial): void {
  const now = Date.now();
  host.sql.exec(
    `INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET state = excluded.state, json = excluded.json, updated_at = excluded.updated_at`,
    flowId(m.taskRunId), ANNOUNCE_FLOW, state, JSON.stringify(m), now, now,
  );
}

function latestToolResultText(host: SessionObject, runId: string): string | null {
  const r = host.sql.exec<{ json: string }>("SELECT json FROM messages WHERE run_id = ? AND role = 'toolResult' ORDER BY seq DESC LIMIT 1", runId).toArray()[0];
  if (!r) return null;
  const msg = JSON.parse(r.json) as TranscriptMessage;
  return textOf(msg.content).trim() || null;
}

function costOf(host: SessionObject, modelRef: string | undefined, usage: { input: number; output: number }): number | null {
  const parts = modelRef ? splitModelRef(modelRef) : null;
  if (!parts) return null;
  const cost = host.cfg.models.providers[parts.provider]?.models?.find((m) => m.id === parts.modelId)?.cost;
  return estimateCostUsd(usage, cost);
}

function outcomeOf(status: string): RunOutcome {
  return status === "ok" || status === "timeout" || status === "aborted" ? status : "error";
}

/** Inside the run-ending transaction of the child. */
function onRunEnded(host: SessionObject, { run, input }: RunEndedEvent): void {
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
    writeFlow(host, "step", {
      taskRunId: run.runId,
      outcome,
      ...(run.error ? { error: run.error } : {}),
      finalReply: freeze(run.status === "ok" ? (run.reply ?? null) : null),
      latestToolResult: freeze(latestToolResultText(host, run.runId)),
      runtimeMs: run.startedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.startedAt : undefined,
      usage,
      costUsd: costOf(host, run.model, usage),
    });
    host.timers.set(ANNOUNCE_TIMER, run.runId, now);
  } else if (input.kind === "subagent_announce") {
    const taskRunId = String(input.data?.taskRunId ?? "");
    const flow = readFlow(host, taskRunId);
    if (!flow || flow.state !== "step") return;
    // A failed or timed-out announce step still announces (without notes): the outcome must reach the requester.
    const notes = run.status === "ok" ? (run.reply ?? "") : "";
    const silent = isSilentToken(notes, "ANNOUNCE_SKIP") || isSilentToken(notes, "NO_REPLY");
    const m = flow.material;
    m.announceRunId = run.runId;
    m.message = silent
      ? null
      : formatSubagentAnnounce({
          outcome: m.outcome,
          error: m.error,
          finalReply: m.finalReply,
          latestToolResult: m.latestToolResult,
          notes,
          runtimeMs: m.runtimeMs,
          usage: m.usage,
          costUsd: m.costUsd,
          sessionKey: host.meta!.key,
          sessionId: host.meta!.sessionId,
          transcriptPath: transcriptPathOf(host.meta!.key),
        });
    writeFlow(host, "handoff", m);
    host.timers.set(HANDOFF_TIMER, taskRunId, now);
  }
  // Kept children are archived N minutes after their last run (any run: a thread-bound child stays while used).
  const archiveMinutes = host.cfg.agents.defaults.subagents.archiveAfterMinutes;
  if (sub.cleanup === "keep" && archiveMinutes > 0) host.timers.set(ARCHIVE_TIMER, "child", now + archiveMinutes * 60_000);
}

/** Queue the announce step. Idempotent on the task run, so a timer re-run after an eviction finds the same run. */
async function startAnnounceStep(host: SessionObject, taskRunId: string): Promise<void> {
  const flow = readFlow(host, taskRunId);
  const sub = host.meta?.subagent;
  if (!flow || flow.state !== "step" || !sub) {
    host.timers.clear(ANNOUNCE_TIMER, taskRunId);
    return;
  }
  const m = flow.material;
  const announceTimeoutMs = host.cfg.agents.defaults.subagents.announceTimeoutMs;
  const run = await host.enqueue({
    input: {
      kind: "subagent_announce",
      message: ANNOUNCE_STEP_MESSAGE,
      provenance: { kind: "internal_system", sourceSessionKey: sub.requesterKey, sourceTool: "sessions_spawn" },
      extraSystemPrompt: subagentAnnouncePrompt({
        requesterKey: sub.requesterKey,
        requesterChannel: sub.requesterChannel,
        childKey: host.key,
        task: sub.task,
        status: statusLabel(m.outcome, m.error),
        result: m.finalReply?.trim() || m.latestToolResult || "(no output)",
      }),
      timeoutSeconds: Math.max(1, Math.ceil(announceTimeoutMs / 1000)),
      deliver: false,
      data: { taskRunId },
    },
    idempotencyKey: `subagent:announce:${taskRunId}`,
  });
  host.timers.clear(ANNOUNCE_TIMER, taskRunId);
  if (!m.announceRunId) {
    m.announceRunId = run.runId;
    // Only while still at "step": the announce run may already have ended and moved the flow on.
    host.sql.exec("UPDATE flows SET json = ? WHERE id = ? AND state = 'step'", JSON.stringify(m), flowId(taskRunId));
  }
}

/**
 * Hand the announce to the requester's object. A throw (requester unreachable, eviction) leaves the
 * timer in place and the alarm retries it with backoff; the requester de-duplicates on the key.
 */
async function handOff(host: SessionObject, taskRunId: string): Promise<void> {
  const flow = readFlow(host, taskRunId);
  const sub = host.meta?.subagent;
  if (!flow || flow.state !== "handoff" || !sub) {
    host.timers.clear(HANDOFF_TIMER, taskRunId);
    return;
  }
  const res = await handAnnounceToRequester(host.bindings, sub.requesterKey, {
    idempotencyKey: announceIdempotencyKey(host.key, taskRunId),
    childKey: host.key,
    childRunId: taskRunId,
    message: flow.material.message ?? null,
    route: sub.requesterRoute ?? null,
  });
  if (res.requesterGone) console.warn("sub-agent announce dropped: its requester session no longer exists", host.key, sub.requesterKey);
  host.storage.transactionSync(() => {
    writeFlow(host, "done", flow.material);
    host.timers.clear(HANDOFF_TIMER, taskRunId);
    // "delete" removes the child only once its announce is safely with the requester.
    if (sub.cleanup === "delete") host.timers.set(DELETE_TIMER, "child", Date.now());
  });
}

function busy(host: SessionObject): boolean {
  const pendingFlow = host.sql.exec("SELECT id FROM flows WHERE kind = ? AND state != 'done' LIMIT 1", ANNOUNCE_FLOW).toArray().length > 0;
  const activeRun = host.sql.exec("SELECT id FROM runs WHERE status IN ('queued', 'running') LIMIT 1").toArray().length > 0;
  return pendingFlow || activeRun;
}

/** Archive (keep) or delete (cleanup "delete") the child: from its own alarm, so it survives restarts. */
async function removeChild(host: SessionObject, timer: TimerRow, archive: boolean): Promise<void> {
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
  if (archive) {
    const retain = host.cfg.tools.sessions_spawn.attachments.retainOnSessionKeep && sub.cleanup === "keep";
    await exportToArchive(host, { retainAttachments: retain });
  }
  // deleteSession clears every table (attachments included), the alarm and the registry row.
  await host.deleteSession();
}

registerSessionExtension({
  name: LIFECYCLE_EXTENSION,
  onRunEnded,
  // The child's spawn attachments, for its runs (GET /v1/sessions/{key}/attachments[/{name}]).
  rpc: {
    attachments: (host) => listAttachments(host),
    attachment: (host, name: string) => readAttachment(host, String(name)),
  },
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
      default:
        return false;
    }
  },
  async beforeDelete(host) {
    // A child deleted before its announce was handed off would hold a requester slot until the
    // requester's slot check notices; free it now (best effort: the check remains the guarantee).
    const sub: SubagentInfo | undefined = host.meta?.subagent;
    if (!sub || sub.status !== "running") return;
    try {
      await releaseChildSlot(host.bindings, sub.requesterKey, host.key);
    } catch (err) {
      console.warn("subagent slot release failed", host.key, err);
    }
  },
});

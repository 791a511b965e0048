import type { RunSnapshot } from "../session/run-schema";
import type { RunInput, TranscriptMessage } from "../session/types";

/**
 * Which events of the session's log are *material state changes* (docs/events.md, "changesSince"), and
 * what `session_status changesSince` says of each. Decided when the event is written, from what that
 * write already knows (the run and its input, the transcript message), so a state change is tagged in
 * the same row and transaction as the event the live stream sends: nothing to keep in step.
 */
export type StateKind =
  | "human_direct_message"
  | "agent_message"
  | "child_spawned"
  | "run_completed"
  | "run_failed"
  | "compacted"
  | "task_changed";

export interface StateChange {
  kind: StateKind;
  actorType: "human" | "agent" | "system";
  occurredAt: number;
  summary: string;
  actorId?: string;
  runId?: string;
  payload?: {
    outcome?: "error" | "timeout" | "cancelled";
    channel?: string;
    /** `task_changed`: which task of the session's ledger, its runtime and the status it reached. */
    taskId?: string;
    runtime?: string;
    status?: string;
  };
}

/** A run admitted (status queued): who asked for it. Internal turns (announces, completions, commands of a flow) are not. */
export function queuedRunChange(run: RunSnapshot, input: RunInput): StateChange | null {
  const p = input.provenance;
  const at = run.createdAt;
  if (input.kind === "subagent_task")
    return {
      kind: "child_spawned",
      actorType: "agent",
      occurredAt: at,
      summary: "child session spawned",
      ...(p?.sourceSessionKey ? { actorId: p.sourceSessionKey } : {}),
      runId: run.runId,
    };
  if (p?.kind === "inter_session")
    return {
      kind: "agent_message",
      actorType: "agent",
      occurredAt: at,
      summary: `message from session ${p.sourceSessionKey ?? "unknown"}`,
      ...(p.sourceSessionKey ? { actorId: p.sourceSessionKey } : {}),
      runId: run.runId,
    };
  if ((input.kind === "inbound" || input.kind === "command") && p?.kind !== "internal_system") {
    const channel = input.route?.channel ?? p?.sourceChannel ?? "unknown";
    return {
      kind: "human_direct_message",
      actorType: "human",
      occurredAt: at,
      summary: `human message via ${channel}`,
      runId: run.runId,
      payload: { channel },
    };
  }
  return null;
}

const FAILED: Record<string, { outcome: "error" | "timeout" | "cancelled"; word: string }> = {
  error: { outcome: "error", word: "failed" },
  lost: { outcome: "error", word: "lost" },
  timeout: { outcome: "timeout", word: "timed out" },
  aborted: { outcome: "cancelled", word: "cancelled" },
};

/** A run reached its final status. A sub-agent's task run is "child run …", as the parent sees it. */
export function endedRunChange(run: RunSnapshot): StateChange | null {
  if (run.status === "queued" || run.status === "running") return null;
  const who = run.kind === "subagent_task" ? "child run" : "run";
  const at = run.endedAt ?? Date.now();
  if (run.status === "ok")
    return {
      kind: "run_completed",
      actorType: "system",
      occurredAt: at,
      summary: `${who} completed`,
      runId: run.runId,
    };
  const f = FAILED[run.status] ?? FAILED.error;
  return {
    kind: "run_failed",
    actorType: "system",
    occurredAt: at,
    summary: `${who} ${f.word}`,
    runId: run.runId,
    payload: { outcome: f.outcome },
  };
}

/** A transcript append: only a compaction marker (src/compaction/store.ts) is a state change. */
export function messageChange(message: TranscriptMessage, runId: string | null): StateChange | null {
  if (message.role !== "system" || message.__openclaw?.kind !== "compaction") return null;
  return {
    kind: "compacted",
    actorType: "system",
    occurredAt: message.timestamp,
    summary: "session compacted",
    ...(runId ? { runId } : {}),
  };
}

/**
 * A task of this session's ledger was recorded or reached another status (docs/tasks.md): the session's own
 * background work changed state. Written on the owner, in the transaction that changed the row
 * (src/tasks/task-api.ts); a change of delivery or outcome alone is no state change.
 */
export function taskChange(t: { taskId: string; runtime: string; status: string }, at: number): StateChange {
  return {
    kind: "task_changed",
    actorType: "system",
    occurredAt: at,
    summary: `${t.runtime} task ${t.status}`,
    payload: { taskId: t.taskId, runtime: t.runtime, status: t.status },
  };
}

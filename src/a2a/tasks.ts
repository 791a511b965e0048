import { type Artifact, type Message, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import type { RunSnapshot } from "../session/run-schema";

/**
 * An A2A task IS one of our runs (docs/protocols.md, "A2A"): the task id is the run id, so the same id works in
 * `GET /v1/runs/{id}`, `/tools/invoke` results and MCP; the state is the run's status, one to one.
 * `timeout` and `lost` have no A2A state of their own: both are `failed`, and the task's metadata carries the run
 * status verbatim (`switchboard.runStatus`) so a client can tell them apart.
 */
export const TASK_STATE_OF_RUN: Record<RunSnapshot["status"], TaskState> = {
  queued: TaskState.TASK_STATE_SUBMITTED,
  running: TaskState.TASK_STATE_WORKING,
  ok: TaskState.TASK_STATE_COMPLETED,
  error: TaskState.TASK_STATE_FAILED,
  timeout: TaskState.TASK_STATE_FAILED,
  aborted: TaskState.TASK_STATE_CANCELED,
  lost: TaskState.TASK_STATE_FAILED,
};

/** The artifact that carries a run's reply; one per task, replaced (not appended) when a stream resets. */
const REPLY_ARTIFACT_ID = "reply";

/**
 * A context id is the part of the session key after `agent:<agentId>:` (docs/protocols.md): `main` is the agent's
 * main session, `a2a:<uuid>` a session a message without a context got. A key of another shape (the global DM
 * bucket) is given whole.
 */
export function contextOfKey(agentId: string, sessionKey: string): string {
  const prefix = `agent:${agentId}:`;
  return sessionKey.startsWith(prefix) ? sessionKey.slice(prefix.length) : sessionKey;
}

function textPart(text: string): Part {
  return { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" };
}

export function agentMessage(run: RunSnapshot, contextId: string, text: string): Message {
  return {
    messageId: `${run.runId}:status`,
    contextId,
    taskId: run.runId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function replyArtifact(text: string): Artifact {
  return {
    artifactId: REPLY_ARTIFACT_ID,
    name: "reply",
    description: "The agent's reply",
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
  };
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** What a run's status says to an A2A client: the reply of a completed run, the error of a failed one. */
function statusText(run: RunSnapshot): string | undefined {
  if (run.status === "ok") return run.reply;
  if (run.error !== undefined) return run.status === "error" ? run.error : `${run.status}: ${run.error}`;
  return run.status === "timeout" || run.status === "lost" ? run.status : undefined;
}

/** The run as an A2A task: its state, the reply as the one artifact, the run's own fields in metadata. */
export function taskOfRun(agentId: string, run: RunSnapshot): Task {
  const contextId = contextOfKey(agentId, run.sessionKey);
  const text = statusText(run);
  return {
    id: run.runId,
    contextId,
    status: {
      state: TASK_STATE_OF_RUN[run.status],
      message: text === undefined ? undefined : agentMessage(run, contextId, text),
      timestamp: iso(run.endedAt ?? run.startedAt ?? run.createdAt),
    },
    artifacts: run.status === "ok" && run.reply !== undefined ? [replyArtifact(run.reply)] : [],
    // The transcript is the session's (GET /v1/sessions/{key}/history); a task carries no copy of it.
    history: [],
    metadata: { switchboard: { runStatus: run.status, sessionKey: run.sessionKey, kind: run.kind } },
  };
}

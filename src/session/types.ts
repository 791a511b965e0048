import type { ChatType, SessionKind } from "../keys";
import type { RUN_KINDS, RUN_STATUSES } from "./run-schema";

/** Transcript message in OpenClaw's raw transcript format (test/tools/sessions-history.test.ts). */
export type ContentBlock =
  | { type: "text"; text: string }
  | { type: "image"; data?: string; mimeType?: string }
  | { type: "thinking"; thinking: string }
  | { type: "toolCall"; id: string; name: string; arguments: unknown };

export interface Provenance {
  kind: "external_user" | "inter_session" | "internal_system";
  sourceSessionKey?: string;
  sourceChannel?: string;
  sourceTool?: string;
}

export interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  cost?: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number };
}

export type TranscriptMessage =
  | { role: "user"; content: ContentBlock[] | string; timestamp: number; provenance?: Provenance }
  | {
      role: "assistant";
      content: ContentBlock[];
      api: string;
      provider: string;
      model: string;
      usage?: Usage;
      stopReason: "stop" | "length" | "toolUse" | "error" | "aborted";
      errorMessage?: string;
      timestamp: number;
    }
  | {
      role: "toolResult";
      toolCallId: string;
      toolName: string;
      content: ContentBlock[];
      isError: boolean;
      timestamp: number;
    }
  | {
      role: "system";
      content: ContentBlock[];
      timestamp: number;
      /** A compaction marker (src/compaction/store.ts), in OpenClaw's history shape. */
      __openclaw?: { kind: "compaction"; id: string; tokensBefore: number; tokensAfter: number };
    };

/** A delivery route: where replies and announces of a session leave the system. */
export interface DeliveryRoute {
  channel: string;
  to: string | null;
  accountId?: string | null;
  threadId?: string | null;
}

/** A delivery that ended dead (src/channels/outbox-attempts.ts), as extensions' `onDeliveryDead` receive it. */
export interface DeadDelivery {
  id: string;
  /** What was delivered: `reply`, `announce` or `subagent_announce` (src/channels/outbox-rows.ts). */
  kind: string;
  idempotencyKey: string;
  route: DeliveryRoute;
  message: string;
  error: string;
}

export interface SessionMeta {
  key: string;
  agentId: string;
  sessionId: string;
  kind: SessionKind;
  createdAt: number;
  updatedAt: number;
  label?: string;
  displayName?: string;
  /** Channel recorded for group sessions (first inbound channel). */
  channel?: string;
  chatType?: ChatType;
  lastChannel?: string;
  lastTo?: string;
  lastAccountId?: string;
  lastThreadId?: string;
  /** Model override set by PATCH or spawn; otherwise the agent's model is used. */
  modelOverride?: string;
  /** Model used by the last run. */
  model?: string;
  modelProvider?: string;
  contextTokens?: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  thinkingLevel?: string;
  verboseLevel?: string;
  systemSent: boolean;
  abortedLastRun: boolean;
  sendPolicy?: "allow" | "deny";
  spawnedBy?: string;
  spawnDepth?: number;
  /** Sub-agent bookkeeping (sessions_spawn). */
  subagent?: SubagentInfo;
}

/** What a sub-agent session remembers about its spawn (set in the spawn transaction). */
export interface SubagentInfo {
  requesterKey: string;
  requesterChannel?: string;
  requesterRoute?: DeliveryRoute;
  runId?: string;
  task: string;
  label?: string;
  mode: "run" | "session";
  cleanup: "delete" | "keep";
  runTimeoutSeconds?: number;
  /** How the requester hears back (fixed at spawn from the requester agent's config); absent = "direct". */
  announceDelivery?: "direct" | "requester";
  status?: "running" | "done" | "failed" | "timeout" | "lost" | "killed";
  outcome?: string;
  startedAt?: number;
  endedAt?: number;
  /** thread=true: the thread key bound to this child and its thread id (announces and replies go there). */
  thread?: { threadKey: string; threadId: string };
  /** Its task run's place in the sub-agent lane (maxConcurrent, src/spawn/subagent-lane-client.ts); absent for children spawned before the lane. */
  lane?: "waiting" | "running" | "released";
  /** Its task in the requester's ledger (src/tasks/task-id.ts): the id carries the requester's key. Absent for children spawned before the ledger. */
  taskId?: string;
  /** Set by `subagents cancel` (src/tasks/task-cancel.ts): its task run's end is then `cancelled` and its announce skips the model step. */
  cancelled?: { at: number; reason: string };
}

export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINAL_STATUSES: ReadonlySet<RunStatus> = new Set(["ok", "error", "timeout", "aborted", "lost"]);

export type RunKind = (typeof RUN_KINDS)[number];

export interface RunInput {
  kind: RunKind;
  message: string;
  provenance?: Provenance;
  /** Extra system prompt for this run only (agent-to-agent or sub-agent context). */
  extraSystemPrompt?: string;
  /** Delivery route of an inbound channel message; recorded on the session when the run starts. */
  route?: DeliveryRoute & { chatType?: ChatType; displayName?: string };
  /** Deliver the reply through the session's channel route (inbound `deliver: true`). */
  deliver?: boolean;
  /** Run deadline override in seconds (sessions_spawn runTimeoutSeconds); default agents.defaults.timeoutSeconds. */
  timeoutSeconds?: number;
  /** Flow this run belongs to (agent-to-agent flow id, sub-agent parent link, …). */
  flowId?: string;
  /** Free-form data for follow-up steps. */
  data?: Record<string, unknown>;
}

export type { RunSnapshot } from "./run-schema";

export interface EnqueueRequest {
  input: RunInput;
  idempotencyKey?: string;
  /** Initial metadata when the session does not exist yet. */
  init?: Partial<
    Pick<SessionMeta, "label" | "spawnedBy" | "spawnDepth" | "modelOverride" | "thinkingLevel" | "subagent">
  >;
  /** The message comes from the session's owner (operator or the agent's own token): owner-only commands apply. */
  senderIsOwner?: boolean;
  /** Refuse (not_found) instead of creating the session: a flow step must not resurrect a deleted session. */
  onlyIfExists?: boolean;
}

export interface HistoryPage {
  messages: Array<TranscriptMessage & { __switchboard: { seq: number } }>;
  hasMore: boolean;
  /** Pass as `before` to read the next (older) page. */
  nextBefore: number | null;
}

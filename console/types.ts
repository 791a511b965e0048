// Shapes of the /v1 answers the console reads (the OpenAPI document at /openapi.json has them all).

export interface SessionRow {
  key: string;
  agentId: string;
  kind: string;
  channel: string;
  displayName?: string;
  label?: string;
  updatedAt: number;
  sessionId: string;
  model?: string;
  totalTokens: number;
  sendPolicy?: "allow" | "deny";
  status?: string;
  archived?: boolean;
}

export interface Run {
  runId: string;
  sessionKey?: string;
  status: string;
  kind: string;
  reply?: string;
  error?: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
}

export interface HistoryMessage {
  role: string;
  content?: unknown;
  timestamp?: number;
  __switchboard?: { seq?: number; runId?: string | null };
  [field: string]: unknown;
}

export interface Delivery {
  id: string;
  kind: string;
  channel: string;
  status: "pending" | "delivered" | "blocked" | "dead";
  attempts: number;
  lastError: string | null;
  updatedAt: number;
  deliveredAt: number | null;
  payload: { to: string | null; message: string };
}

export interface DeadTimer {
  kind: string;
  ref: string;
  attempts: number;
  lastError: string;
  diedAt: number;
  retryable: boolean;
}

export interface Agent {
  id: string;
  name?: string;
  default: boolean;
  model: string;
  sandboxed: boolean;
  runtime: string;
}

export const RUN_ENDED = new Set(["ok", "error", "timeout", "aborted", "lost"]);

/** A node of GET /v1/sessions/{key}/tree. */
export interface TreeNode {
  key: string;
  parentKey: string | null;
  depth: number;
  agentId: string;
  label?: string;
  status?: string;
  startedAt?: number;
  endedAt?: number;
  runtimeMs?: number;
  updatedAt: number;
  model?: string;
  totalTokens: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
}

export interface SessionTree {
  sessionKey: string;
  nodes: TreeNode[];
  truncated: boolean;
}

/** Where a transcript message came from, when another session or the gateway wrote it. */
export interface Provenance {
  kind: string;
  sourceSessionKey?: string;
  sourceTool?: string;
}

/** A task of a session's ledger (GET /v1/sessions/{key}/tasks, GET /v1/tasks/{id}, the stream's `task` event). */
export interface Task {
  taskId: string;
  /** What does the work: `subagent`, `yield`, `send`, … — shown as it comes, whatever it is. */
  runtime: string;
  childSessionKey?: string;
  runId?: string;
  label?: string;
  task: string;
  status: string;
  deliveryStatus: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  terminalSummary?: string;
  terminalOutcome?: string;
}

export const TASK_OPEN = new Set(["queued", "running"]);

import { z } from "zod";
import type { RunStatus } from "../session/types";

/**
 * The task ledger's vocabulary (docs/tasks.md): statuses, delivery statuses, notify policies and the record
 * every surface (REST, `subagents`, the typed client) reads.
 */

export const TASK_STATUSES = ["queued", "running", "succeeded", "failed", "timed_out", "cancelled", "lost"] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const TERMINAL_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set([
  "succeeded",
  "failed",
  "timed_out",
  "cancelled",
  "lost",
]);
export const isTerminalTask = (s: TaskStatus): boolean => TERMINAL_TASK_STATUSES.has(s);

export const DELIVERY_STATUSES = [
  "pending",
  "delivered",
  "session_queued",
  "failed",
  "dismissed",
  "parent_missing",
  "not_applicable",
] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export const NOTIFY_POLICIES = ["done_only", "state_changes", "silent"] as const;
export type NotifyPolicy = (typeof NOTIFY_POLICIES)[number];

/** Runtimes that record tasks: sub-agents, yields and long sends (docs/tasks.md, "What creates a task"). */
export const TASK_RUNTIMES = ["subagent", "yield", "send"] as const;
export type TaskRuntime = (typeof TASK_RUNTIMES)[number];

/** How a run's end maps onto its task (docs/tasks.md, "State machine"). */
export function taskStatusOfRun(status: RunStatus): TaskStatus {
  switch (status) {
    case "queued":
      return "queued";
    case "running":
      return "running";
    case "ok":
      return "succeeded";
    case "timeout":
      return "timed_out";
    case "aborted":
      return "cancelled";
    case "lost":
      return "lost";
    default:
      return "failed";
  }
}

/** The error every task ended by `subagents cancel` records, the caller's own and each descendant's. */
export const CANCELLED_BY_OPERATOR = "Cancelled by operator.";

/** A terminal task is kept this long after it ended, a lost one this long (docs/tasks.md, "Retention"). */
export const TASK_RETENTION_MS = 7 * 24 * 60 * 60_000;
export const LOST_TASK_RETENTION_MS = 24 * 60 * 60_000;

export const taskRecordSchema = z
  .strictObject({
    taskId: z.string().describe("Stable id; carries the owner session's key (docs/tasks.md)"),
    runtime: z
      .enum(TASK_RUNTIMES)
      .describe(
        "What does the work: `subagent` (sessions_spawn), `yield` (sessions_yield's wait), `send` (a sessions_send that outlived its wait)",
      ),
    requesterSessionKey: z.string().describe("The session that started the task and whose ledger holds it"),
    ownerKey: z.string().describe("Same as requesterSessionKey: the ledger's session"),
    scopeKind: z.literal("session"),
    childSessionKey: z.string().optional().describe("The session that runs the work (a sub-agent's key)"),
    targetSessionKey: z
      .string()
      .optional()
      .describe("A `send` task's target: the session whose run (`runId`) does the work"),
    agentId: z.string().optional().describe("Agent of the session that runs the work"),
    runId: z.string().optional().describe("The run doing the work, once known"),
    label: z.string().optional(),
    task: z.string().describe("What was asked (cut to 2,000 characters)"),
    status: z.enum(TASK_STATUSES),
    deliveryStatus: z.enum(DELIVERY_STATUSES).describe("Whether the result reached the requester"),
    notifyPolicy: z.enum(NOTIFY_POLICIES),
    createdAt: z.number().int(),
    startedAt: z.number().int().optional(),
    endedAt: z.number().int().optional(),
    lastEventAt: z.number().int().optional(),
    cleanupAfter: z.number().int().optional().describe("When the ledger forgets the task (terminal tasks only)"),
    error: z.string().optional(),
    terminalSummary: z.string().optional().describe("The start of the final result (at most 500 characters)"),
    terminalOutcome: z.enum(["succeeded", "blocked"]).optional(),
    model: z.string().optional(),
    totalTokens: z.number().int().optional(),
  })
  .meta({ id: "Task", description: "A background task of the ledger (docs/tasks.md)." });
export type TaskRecord = z.infer<typeof taskRecordSchema>;

/** What a runtime reports about its task; every field optional but the status rules of task-store.ts apply. */
export interface TaskUpdate {
  status?: TaskStatus;
  runId?: string;
  error?: string;
  terminalSummary?: string;
  terminalOutcome?: "succeeded" | "blocked";
  deliveryStatus?: DeliveryStatus;
  startedAt?: number;
  endedAt?: number;
  model?: string;
  totalTokens?: number;
}

/** What creates a task row (src/tasks/task-api.ts `createTask`). */
export interface TaskInit {
  runtime: TaskRuntime;
  task: string;
  taskId?: string;
  label?: string;
  childSessionKey?: string;
  agentId?: string;
  runId?: string;
  model?: string;
  notifyPolicy?: NotifyPolicy;
  status?: "queued" | "running";
  deliveryStatus?: DeliveryStatus;
}

/** `subagents wait`'s bounds (OpenClaw's): at most 32 task ids, held at most 60 s — the tool refuses more, the ledger caps again. */
export const WAIT_MAX_TASK_IDS = 32;
export const WAIT_MAX_SECONDS = 60;

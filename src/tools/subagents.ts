import { z } from "zod";
import { invalid } from "../errors";
import { displayKey } from "../keys";
import { listText, runViews, type TaskRowView, taskRowView } from "../tasks/subagent-views";
import { cancelTaskOf } from "../tasks/task-client";
import { listTree, ownerInTree } from "../tasks/task-tree";
import { WAIT_MAX_TASK_IDS } from "../tasks/task-types";
import { type Refusal, refusal, type ToolContext } from "./context";
import { defineTool } from "./definition";
import {
  SUBAGENTS_WAIT_DEFAULT_SECONDS,
  SUBAGENTS_WAIT_MAX_SECONDS,
  subagentsWait,
  type WaitResult,
} from "./subagents-wait";

/**
 * `subagents` (test/tools/subagents.test.ts): the background work of the caller's session tree from the task
 * ledger (docs/tasks.md) — `list` it, `wait` for some of it to end (a server-side wait, src/tools/subagents-wait.ts),
 * `cancel` a task and everything below it (src/tasks/task-cancel.ts). Tasks are named by task id only.
 */

export const RECENT_MINUTES_DEFAULT = 30;
export const RECENT_MINUTES_CAP = 1440;
/** Larger values are accepted and capped to RECENT_MINUTES_CAP, as OpenClaw does; this bounds the input. */
const RECENT_MINUTES_MAX = 525_600;
/** Tasks one `list` shows (the caller's, then its children's, …; docs/limits.md). */
export const LIST_MAX_TASKS = 100;
/** Ids accepted in `taskIds` before de-duplication (more than 32 distinct ones is refused with OpenClaw's text). */
const TASK_IDS_INPUT_MAX = 256;
const TASK_ID_MAX_CHARS = 1024;

export const subagentsSchema = z.strictObject({
  action: z
    .string()
    .max(32)
    .optional()
    .describe(
      "`list` (default): the tree's tasks and runs; `wait`: until one of `taskIds` ends; `cancel`: `taskId` and all below it.",
    ),
  recentMinutes: z
    .number()
    .int()
    .min(1)
    .max(RECENT_MINUTES_MAX)
    .optional()
    .describe(
      `list: also show tasks that ended within this many minutes (default ${RECENT_MINUTES_DEFAULT}, capped at ${RECENT_MINUTES_CAP}).`,
    ),
  taskIds: z
    .array(z.string().max(TASK_ID_MAX_CHARS))
    .max(TASK_IDS_INPUT_MAX)
    .optional()
    .describe(`wait: the task ids (from list) to wait for, 1–${WAIT_MAX_TASK_IDS}.`),
  timeoutSeconds: z
    .number()
    .int()
    .min(0)
    .max(SUBAGENTS_WAIT_MAX_SECONDS)
    .optional()
    .describe(
      `wait: seconds to wait (default ${SUBAGENTS_WAIT_DEFAULT_SECONDS}, 0–${SUBAGENTS_WAIT_MAX_SECONDS}; 0 reads a snapshot).`,
    ),
  taskId: z.string().max(TASK_ID_MAX_CHARS).optional().describe("cancel: the task id (from list) to cancel."),
});
export type SubagentsArgs = z.infer<typeof subagentsSchema>;

export interface ListResult {
  status: "ok";
  action: "list";
  requesterSessionKey: string;
  callerSessionKey: string;
  callerIsSubagent: boolean;
  total: number;
  taskTotal: number;
  tasks: TaskRowView[];
  active: ReturnType<typeof runViews>["active"];
  recent: ReturnType<typeof runViews>["recent"];
  text: string;
  truncated?: boolean;
}

export interface CancelResult {
  status: "cancelled" | "error";
  taskId: string;
  found: boolean;
  cancelled: boolean;
  reason?: string;
}

async function list(ctx: ToolContext, args: SubagentsArgs): Promise<ListResult> {
  const recentMinutes = Math.min(RECENT_MINUTES_CAP, args.recentMinutes ?? RECENT_MINUTES_DEFAULT);
  const now = Date.now();
  const sinceMs = now - recentMinutes * 60_000;
  const { tasks, truncated } = await listTree(ctx.env, ctx.caller.sessionKey, sinceMs, LIST_MAX_TASKS);
  // Newest update first across the whole tree (each ledger answered newest first, level by level).
  tasks.sort((a, b) => (b.lastEventAt ?? b.createdAt) - (a.lastEventAt ?? a.createdAt));
  const { active, recent } = runViews(tasks, sinceMs, now);
  const key = displayKey(ctx.caller.sessionKey);
  return {
    status: "ok",
    action: "list",
    requesterSessionKey: key,
    callerSessionKey: key,
    callerIsSubagent: ctx.caller.isSubagent,
    total: new Set(tasks.flatMap((t) => (t.childSessionKey ? [t.childSessionKey] : []))).size,
    taskTotal: tasks.length,
    tasks: tasks.map(taskRowView),
    active,
    recent,
    text: listText(active, recent, recentMinutes),
    ...(truncated ? { truncated } : {}),
  };
}

/** A leaf sub-agent (at the depth cap) may cancel only its own tasks, and it has none: OpenClaw's rule. */
function isLeaf(ctx: ToolContext): boolean {
  return ctx.caller.isSubagent && (ctx.caller.spawnDepth ?? 1) >= ctx.cfg.agents.defaults.subagents.maxSpawnDepth;
}

async function cancel(ctx: ToolContext, args: SubagentsArgs): Promise<CancelResult | Refusal> {
  const taskId = args.taskId;
  if (!taskId) throw invalid("taskId required");
  const owner = await ownerInTree(ctx.env, ctx.caller.sessionKey, taskId);
  if (isLeaf(ctx) && owner !== ctx.caller.sessionKey)
    return refusal("forbidden", "Leaf subagents cannot cancel other sessions.");
  if (!owner) return refusal("forbidden", "Task outside session tree.");
  const answer = await cancelTaskOf(ctx.env, owner, taskId);
  return {
    status: answer.cancelled ? "cancelled" : "error",
    taskId,
    found: answer.found,
    cancelled: answer.cancelled,
    ...(answer.reason ? { reason: answer.reason } : {}),
  };
}

export async function subagents(
  ctx: ToolContext,
  args: SubagentsArgs,
): Promise<ListResult | WaitResult | CancelResult | Refusal> {
  switch (args.action ?? "list") {
    case "list":
      return list(ctx, args);
    case "wait":
      return subagentsWait(ctx, args.taskIds, args.timeoutSeconds);
    case "cancel":
      return cancel(ctx, args);
    default:
      return refusal("error", "Unsupported action.");
  }
}

export const subagentsTool = defineTool({
  name: "subagents",
  description:
    'Background work of this session\'s sub-agents (and theirs), from the task ledger. action "list" (default): tasks and runs with their status; "wait": hold until one of taskIds ends (timeoutSeconds 0–60, default 30); "cancel": stop taskId and every sub-agent below it. To be woken when children finish, do not poll: their results are announced to you.',
  schema: subagentsSchema,
  handler: subagents,
  subagents: "orchestrators",
  wait: { argument: "timeoutSeconds", defaultSeconds: SUBAGENTS_WAIT_DEFAULT_SECONDS },
});

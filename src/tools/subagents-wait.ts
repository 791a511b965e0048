import { invalid } from "../errors";
import { type TaskRowView, taskRowView } from "../tasks/subagent-views";
import { getTasksOf, waitTasksOf } from "../tasks/task-client";
import { ownerInTree } from "../tasks/task-tree";
import { isTerminalTask, type TaskRecord, WAIT_MAX_SECONDS, WAIT_MAX_TASK_IDS } from "../tasks/task-types";
import type { ToolContext } from "./context";

/**
 * `subagents` action `wait` (test/tools/subagents-wait.test.ts). The wait is held server-side in each owner's
 * object, woken by the ledger row's change (src/tasks/task-waiters.ts), never by polling. The rows are durable
 * and the wait is not: when an owner restarts while holding it (eviction, deploy), the call reads the rows as
 * they are now and attaches again for the time left — the same re-attach a `sessions_send` wait's client does
 * with `GET /v1/runs/{id}/wait`, done here for the caller.
 */

export const SUBAGENTS_WAIT_DEFAULT_SECONDS = 30;
export const SUBAGENTS_WAIT_MAX_SECONDS = WAIT_MAX_SECONDS;
/** Re-attaches after a restart of an owner, per call: a wait never loops on an object that keeps failing. */
const MAX_ATTACHES = 5;

export interface WaitResult {
  status: "ok";
  action: "wait";
  reason: "unavailable" | "attention" | "completed" | "timeout";
  tasks: TaskRowView[];
  completed: string[];
  attention: string[];
  unavailable?: string[];
}

function selectedIds(raw: string[] | undefined): string[] {
  const ids = [...new Set((raw ?? []).map((s) => s.trim()).filter((s) => s.length > 0))];
  if (ids.length === 0) throw invalid("taskIds required");
  if (ids.length > WAIT_MAX_TASK_IDS) throw invalid(`subagents wait supports at most ${WAIT_MAX_TASK_IDS} taskIds.`);
  return ids;
}

/** The selected tasks as their ledgers hold them now, in the order they were asked for. */
async function snapshot(env: Env, byOwner: Map<string, string[]>, ids: string[]): Promise<Map<string, TaskRecord>> {
  const lists = await Promise.all([...byOwner].map(([owner, own]) => getTasksOf(env, owner, own)));
  const found = new Map(lists.flat().map((t) => [t.taskId, t]));
  return new Map(ids.flatMap((id) => (found.has(id) ? [[id, found.get(id)!] as const] : [])));
}

/** A task needs its requester: its result could not be handed over (OpenClaw's `blocked`). */
const needsAttention = (t: TaskRecord) => t.status === "succeeded" && t.terminalOutcome === "blocked";

function resultOf(ids: string[], tasks: Map<string, TaskRecord>, unavailable: string[]): WaitResult {
  const visible = ids.flatMap((id) => (tasks.has(id) ? [tasks.get(id)!] : []));
  const completed = visible.filter((t) => isTerminalTask(t.status)).map((t) => t.taskId);
  const attention = visible.filter(needsAttention).map((t) => t.taskId);
  // OpenClaw's precedence: unavailable > attention > completed > timeout.
  const reason =
    unavailable.length > 0
      ? "unavailable"
      : attention.length > 0
        ? "attention"
        : completed.length > 0
          ? "completed"
          : "timeout";
  return {
    status: "ok",
    action: "wait",
    reason,
    tasks: visible.map(taskRowView),
    completed,
    attention,
    ...(unavailable.length > 0 ? { unavailable } : {}),
  };
}

export async function subagentsWait(
  ctx: ToolContext,
  rawIds: string[] | undefined,
  timeoutSeconds: number | undefined,
): Promise<WaitResult> {
  const ids = selectedIds(rawIds);
  const timeoutMs = Math.min(SUBAGENTS_WAIT_MAX_SECONDS, timeoutSeconds ?? SUBAGENTS_WAIT_DEFAULT_SECONDS) * 1000;
  const deadline = Date.now() + timeoutMs;
  // Scope: only tasks of the caller's tree; an id outside it (or forged) is unavailable, never waited on.
  const owners = await Promise.all(ids.map((id) => ownerInTree(ctx.env, ctx.caller.sessionKey, id)));
  const byOwner = new Map<string, string[]>();
  ids.forEach((id, i) => {
    const owner = owners[i];
    if (owner) byOwner.set(owner, [...(byOwner.get(owner) ?? []), id]);
  });
  let tasks = await snapshot(ctx.env, byOwner, ids);
  const unavailable = ids.filter((id) => !tasks.has(id));
  const settled = () => [...tasks.values()].some((t) => isTerminalTask(t.status));
  if (unavailable.length > 0 || settled()) return resultOf(ids, tasks, unavailable);
  for (let attach = 0; attach < MAX_ATTACHES && !settled(); attach++) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    // The first owner whose task ends answers; the others' waits end by their own timeout.
    const waits = [...byOwner].map(([owner, own]) => waitTasksOf(ctx.env, owner, own, left));
    for (const w of waits) w.catch(() => undefined);
    await Promise.race(waits).catch(() => undefined);
    tasks = await snapshot(ctx.env, byOwner, ids);
  }
  return resultOf(
    ids,
    tasks,
    ids.filter((id) => !tasks.has(id)),
  );
}

import { ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
import { SwitchboardError } from "../errors";
import { sessionKeyOfRun } from "../session/run-id";
import type { RunSnapshot } from "../session/run-schema";
import { FINAL_STATUSES } from "../session/types";
import { abortRunHandle } from "../tasks/run-abort";
import type { ToolContext } from "../tools/context";
import { handleOwner } from "./handle-owner";
import type { Principal } from "./principal";

/**
 * MCP tasks over Switchboard runs (docs/protocols.md, "MCP tasks"). A task-augmented call of a tool whose
 * definition says `task: true` (sessions_send, sessions_spawn) starts its run without waiting and answers
 * with the run as a task; the task id IS the run id (`<uuid>.<base64url(sessionKey)>`, src/session/run-id.ts),
 * so every task request is routed to the owning session object with no lookup and nothing is kept here:
 * `tasks/get`, `tasks/result` and `tasks/cancel` read and abort the run row in that session's SQLite, the
 * same row `GET /v1/runs/{id}` and `POST /v1/runs/{id}/abort` use (one handle for every protocol), and
 * `tasks/list` pages the requester's ledger (src/http/mcp-task-list.ts).
 *
 * Two flavours, one mapping:
 *   - "2025": protocol 2025-11-25's core tasks (`params.task` on tools/call, `CreateTaskResult {task}`,
 *     tasks/get|result|cancel, the `tasks` capability, `execution.taskSupport` on tools);
 *   - "2026": revision 2026-07-28's tasks extension `io.modelcontextprotocol/tasks` (the client declares it
 *     in the request's capabilities, the server answers `resultType: "task"`, tasks/get carries the result,
 *     tasks/cancel acknowledges).
 */

export type TaskFlavour = "2025" | "2026";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

export const MCP_TASKS = {
  /**
   * The poll interval suggested to clients. A run's reply takes seconds to minutes; polling faster only
   * costs the owning object reads (each tasks/get is one indexed row read).
   */
  pollIntervalMs: 2_000,
};

type TaskStatus = "working" | "completed" | "failed" | "cancelled";

/**
 * A run status as a task status. A run that ended in error, timeout or lost is a tool call that completed
 * with `isError` — under 2025-11-25 that is `failed`; under the 2026 extension `failed` is kept for JSON-RPC
 * errors, so it is `completed` with an error result. `aborted` (REST, A2A or tasks/cancel) is `cancelled`.
 */
function taskStatusOf(run: RunSnapshot, flavour: TaskFlavour): TaskStatus {
  switch (run.status) {
    case "queued":
    case "running":
      return "working";
    case "ok":
      return "completed";
    case "aborted":
      return "cancelled";
    default:
      return flavour === "2025" ? "failed" : "completed";
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The task a run is, in the flavour's field names (ttl: null — a run is kept as long as its session). */
export function taskOf(run: RunSnapshot, flavour: TaskFlavour) {
  const status = taskStatusOf(run, flavour);
  const statusMessage = run.error ? `Run ${run.status}: ${run.error}` : `Run ${run.status}`;
  const common = {
    taskId: run.runId,
    status,
    statusMessage,
    createdAt: iso(run.createdAt),
    lastUpdatedAt: iso(run.endedAt ?? run.startedAt ?? run.createdAt),
  };
  return flavour === "2025"
    ? { ...common, ttl: null, pollInterval: MCP_TASKS.pollIntervalMs }
    : { ...common, ttlMs: null, pollIntervalMs: MCP_TASKS.pollIntervalMs };
}

/**
 * A finished task's result, a CallToolResult: the run as `GET /v1/runs/{id}` shows it (structured and as
 * JSON text), an error unless the run ended ok. The same for both tools: the task's run is the handle.
 */
export function taskResultOf(run: RunSnapshot) {
  return {
    content: [{ type: "text" as const, text: JSON.stringify(run) }],
    structuredContent: run as unknown as Record<string, unknown>,
    ...(run.status === "ok" ? {} : { isError: true }),
  };
}

export const isFinal = (run: RunSnapshot) => FINAL_STATUSES.has(run.status);

const taskNotFound = (taskId: string) =>
  new ProtocolError(ProtocolErrorCode.InvalidParams, `Failed to retrieve task: Task not found: ${taskId}`);

/**
 * The session that owns a task, if the caller may see it: the one check of every id-named handle
 * (src/http/handle-owner.ts), its answers as MCP reports a bad task id (-32602) — an id naming no session we
 * could hold is "not found", a session outside the token's scope is refused with the REST text. Each task
 * request calls it once and passes the key on.
 */
export function taskSession(ctx: ToolContext, principal: Principal, taskId: string): string {
  try {
    return handleOwner(ctx.cfg, principal, taskId, "Task");
  } catch (err) {
    if (err instanceof SwitchboardError && err.type === "not_found") throw taskNotFound(taskId);
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, err instanceof Error ? err.message : String(err));
  }
}

/** The run of a task in its owning session (`key` from taskSession), read from SQLite (nothing is held in memory). */
export async function taskRun(ctx: ToolContext, key: string, taskId: string): Promise<RunSnapshot> {
  const run = await ctx.env.SESSIONS.getByName(key).getRun(taskId);
  if (!run) throw taskNotFound(taskId);
  return run;
}

/**
 * Wait for a task's run to end, at most `waitMs` (2025's tasks/result blocks until the end, but an MCP
 * request must finish before the client's 60 s timeout: src/http/mcp-tools.ts MCP_MAX_WAIT_SECONDS).
 */
export async function waitTaskRun(ctx: ToolContext, key: string, taskId: string, waitMs: number) {
  const run = await taskRun(ctx, key, taskId);
  if (isFinal(run)) return run;
  const stub = ctx.env.SESSIONS.getByName(key);
  // The object may restart while holding the wait (its waiters are memory): the run row is durable.
  return (await stub.waitRun(taskId, waitMs).catch(() => null)) ?? (await stub.getRun(taskId)) ?? run;
}

/**
 * Abort a task's run through the one abort every surface takes (src/tasks/run-abort.ts): a spawn's child run
 * cancels its ledger task, so the child's own sub-agents end too.
 */
export async function cancelTaskRun(
  ctx: ToolContext,
  key: string,
  taskId: string,
): Promise<{ run: RunSnapshot; applied: boolean }> {
  const { run, applied } = await abortRunHandle(ctx.env, key, taskId);
  if (!run) throw taskNotFound(taskId);
  return { run, applied };
}

/** Whether a 2026-era request declared the tasks extension in its per-request client capabilities. */
export function declaresTasks(envelope: unknown): boolean {
  const caps = (envelope as Record<string, unknown> | undefined)?.["io.modelcontextprotocol/clientCapabilities"] as
    | { extensions?: Record<string, unknown> }
    | undefined;
  return typeof caps?.extensions?.[TASKS_EXTENSION] === "object" && caps.extensions[TASKS_EXTENSION] !== null;
}

/** The 2026 extension's error for a task method from a client that did not declare the extension. */
export function missingTasksCapability() {
  return new ProtocolError(ProtocolErrorCode.MissingRequiredClientCapability, "Missing required client capability", {
    requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
}

/** The wait argument set to 0: a task call starts its run and answers at once (the task replaces the wait). */
export function withoutWait(waitArg: string | undefined, rawArgs: unknown): unknown {
  if (!waitArg || typeof rawArgs !== "object" || rawArgs === null || Array.isArray(rawArgs)) return rawArgs;
  const snake = waitArg.replace(/[A-Z]/g, (ch) => `_${ch.toLowerCase()}`);
  const args = { ...(rawArgs as Record<string, unknown>) };
  delete args[snake];
  args[waitArg] = 0;
  return args;
}

/** The run a tool's result names, if it started one: a non-refusal result carrying a real run id. */
export function startedRunId(structured: unknown, isError: boolean): string | undefined {
  if (isError || typeof structured !== "object" || structured === null) return undefined;
  const runId = (structured as { runId?: unknown }).runId;
  return typeof runId === "string" && sessionKeyOfRun(runId) !== null ? runId : undefined;
}

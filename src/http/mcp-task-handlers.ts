import {
  type JSONRPCRequest,
  ProtocolError,
  ProtocolErrorCode,
  type Result,
  Server,
  type ServerContext,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import type { RunSnapshot } from "../session/run-schema";
import type { ToolContext } from "../tools/context";
import { TOOLS } from "../tools/registry";
import { listCallerTasks } from "./mcp-task-list";
import {
  cancelTaskRun,
  declaresTasks,
  isFinal,
  missingTasksCapability,
  startedRunId,
  TASKS_EXTENSION,
  type TaskFlavour,
  taskOf,
  taskResultOf,
  taskRun,
  taskSession,
  waitTaskRun,
  withoutWait,
} from "./mcp-tasks";
import type { Principal } from "./principal";

/**
 * The MCP task methods on the SDK server (docs/protocols.md, "MCP tasks"). The v2 SDK parses task wire
 * vocabulary but ships no task runtime, so Switchboard's is here, over runs (src/http/mcp-tasks.ts):
 * `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` are registered with explicit schemas (the SDK
 * serves `tasks/get` and `tasks/cancel` on 2026-07-28 only that way, as the extension's methods, and refuses
 * `tasks/result` and `tasks/list` there: the extension has neither), and a task-augmented `tools/call` is answered by
 * `TaskServer` before the SDK's tools/call result check, which knows only `CallToolResult`.
 */

type CallResult = { structuredContent?: unknown; isError?: boolean } & Result;

export interface TaskDeps {
  ctx: ToolContext;
  principal: Principal;
  flavour: TaskFlavour;
  /** The tool call as /mcp makes it (src/http/mcp-tools.ts), with the wait already removed. */
  call: (name: string, args: unknown) => Promise<CallResult>;
  /** The wait in seconds a call of this tool would make over MCP (undefined: the tool does not wait). */
  waitSeconds: (name: string, args: unknown) => number | undefined;
  /** Longest server-side wait of one MCP request, in ms (tasks/result). */
  maxWaitMs: number;
}

/** An SDK server whose task-augmented tools/call starts the run and answers with its task. */
export class TaskServer extends Server {
  taskCall?: (request: JSONRPCRequest, rc: ServerContext) => Promise<Result | undefined>;

  protected override _wrapHandler(
    method: string,
    handler: (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result>,
  ): (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result> {
    const wrapped = super._wrapHandler(method, handler);
    if (method !== "tools/call") return wrapped;
    return async (request, rc) => (await this.taskCall?.(request, rc)) ?? wrapped(request, rc);
  }
}

/** What the server advertises: 2025-11-25's `tasks` capability, or the 2026 extension. */
export function taskCapabilities(flavour: TaskFlavour) {
  return flavour === "2025"
    ? { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }
    : { extensions: { [TASKS_EXTENSION]: {} } };
}

const taskIdParams = z.looseObject({ taskId: z.string().max(1024) });
const listParams = z.looseObject({ cursor: z.string().max(1024).optional() });

/** Install the task methods and the task-augmented tools/call on one request's server. */
export function installTasks(server: TaskServer, deps: TaskDeps): void {
  const { ctx, principal, flavour } = deps;
  server.taskCall = (request, rc) => startTask(deps, request, rc);

  // 2026: the extension's methods are only for clients that declared it on the request (its MUST).
  const declared = (rc: ServerContext) => {
    if (flavour === "2026" && !declaresTasks(rc.mcpReq.envelope)) throw missingTasksCapability();
  };

  server.setRequestHandler("tasks/get", { params: taskIdParams }, async ({ taskId }, rc) => {
    declared(rc);
    const run = await taskRun(ctx, taskSession(ctx, principal, taskId), taskId);
    const task = taskOf(run, flavour);
    // 2026's tasks/get carries the result of a completed task (there is no tasks/result).
    return flavour === "2026" && task.status === "completed" ? { ...task, result: taskResultOf(run) } : task;
  });

  server.setRequestHandler("tasks/result", { params: taskIdParams }, async ({ taskId }) => {
    const run = await waitTaskRun(ctx, taskSession(ctx, principal, taskId), taskId, deps.maxWaitMs);
    if (!isFinal(run))
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Task ${taskId} is still ${taskOf(run, flavour).status} after ${deps.maxWaitMs / 1000} s; poll tasks/get and ask again once it has ended`,
      );
    return { ...taskResultOf(run), _meta: { "io.modelcontextprotocol/related-task": { taskId } } };
  });

  server.setRequestHandler("tasks/cancel", { params: taskIdParams }, async ({ taskId }, rc) => {
    declared(rc);
    // One read and one abort (src/tasks/run-abort.ts): a run that had already ended is answered as it is.
    const { run, applied } = await cancelTaskRun(ctx, taskSession(ctx, principal, taskId), taskId);
    // 2025-11-25: cancelling a task in a terminal status is an error; the 2026 extension only acknowledges.
    if (flavour === "2025" && !applied)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `Cannot cancel task: already in terminal status ${taskOf(run, flavour).status}`,
      );
    return flavour === "2025" ? taskOf(run, flavour) : {};
  });

  // The caller's tasks, a page at a time (src/http/mcp-task-list.ts); 2025-11-25 only: the 2026-07-28 extension
  // has no list (the SDK would refuse it there anyway, as a method of another era: -32601).
  if (flavour === "2025")
    server.setRequestHandler("tasks/list", { params: listParams }, ({ cursor }) => listCallerTasks(ctx, cursor));
}

/**
 * A tools/call the client asked to run as a task, answered with the task; undefined for every other call
 * (the SDK's own tools/call path answers it). 2025-11-25: the client asks with `params.task`. 2026: the
 * client declares the extension and the server decides — a call that would wait (sessions_send with a
 * wait) or hands off work (sessions_spawn) becomes a task.
 */
async function startTask(deps: TaskDeps, request: JSONRPCRequest, rc: ServerContext): Promise<Result | undefined> {
  const params = (request.params ?? {}) as { name?: unknown; arguments?: unknown; task?: unknown };
  const def = typeof params.name === "string" ? TOOLS.find((t) => t.name === params.name) : undefined;
  if (!def?.task) return undefined;
  const asked =
    deps.flavour === "2025"
      ? typeof params.task === "object" && params.task !== null
      : declaresTasks(rc.mcpReq.envelope) && (deps.waitSeconds(def.name, params.arguments) ?? 1) > 0;
  if (!asked) return undefined;
  const result = await deps.call(def.name, withoutWait(def.wait?.argument, params.arguments));
  const runId = startedRunId(result.structuredContent, result.isError === true);
  // No run started (a refusal, bad arguments, sessions_send's steer or notify): the tool's own answer.
  if (!runId) return result;
  // The tool returned after the run row committed in its session (its enqueue's transaction), so tasks/get
  // resolves from now on — the durability both flavours require before a task is handed out.
  let run: RunSnapshot;
  try {
    run = await taskRun(deps.ctx, taskSession(deps.ctx, deps.principal, runId), runId);
  } catch {
    // A run the caller may not read by id (an agent token sending into another agent's session, as
    // GET /v1/runs/{id} refuses it) cannot be polled: the call answers as a plain, non-waiting call.
    return result;
  }
  const task = taskOf(run, deps.flavour);
  return deps.flavour === "2025" ? { task } : { resultType: "task", ...task };
}

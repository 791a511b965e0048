import { ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
import { pageTasksOf } from "../tasks/task-client";
import { TASK_PAGE_MAX } from "../tasks/task-page";
import { isTerminalTask, type TaskRecord } from "../tasks/task-types";
import type { ToolContext } from "../tools/context";
import { MCP_TASKS } from "./mcp-tasks";

/**
 * `tasks/list` (protocol 2025-11-25; docs/protocols.md, "MCP tasks"): the caller's tasks are the tasks its
 * requester session started — the session of `X-Session-Key`, or the token's main session, which the token's
 * scope was checked against before the SDK answered (src/http/mcp.ts). They are that session's ledger
 * (docs/tasks.md): every task-augmented `sessions_spawn` is recorded there with the child's run as its run,
 * and the run id is the MCP task id. A page is one call into that one ledger, so listing costs the page,
 * whatever the session holds. The 2026-07-28 tasks extension defines no `tasks/list` (its clients keep the
 * task ids they were handed), so the method is registered for 2025-11-25 only.
 */

/** Tasks per page (docs/limits.md); MCP lets the server choose, the client follows `nextCursor`. */
export const MCP_TASK_PAGE = TASK_PAGE_MAX;
/** A cursor longer than this was not ours. */
const MAX_CURSOR_CHARS = 64;
const CURSOR_PREFIX = "tl1:";

/** The cursor is opaque to clients: a versioned position in the ledger, base64url so it is one token. */
function encodeCursor(seq: number): string {
  return btoa(`${CURSOR_PREFIX}${seq}`).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decodeCursor(cursor: string): number {
  const bad = () => new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor: ${cursor.slice(0, 80)}`);
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
  let text: string;
  try {
    text = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    throw bad();
  }
  const m = /^tl1:([1-9][0-9]{0,14})$/.exec(text);
  if (!m) throw bad();
  return Number(m[1]);
}

/**
 * A ledger task as a 2025-11-25 task, by the mapping of runs (src/http/mcp-tasks.ts): open is `working`,
 * `succeeded` is `completed`, `cancelled` is `cancelled` and every other end `failed`. The ledger follows
 * its run's end through the child's report, so for one task `tasks/get` (which reads the run) is the authority.
 */
function taskOfRecord(t: TaskRecord & { runId: string }) {
  const status = !isTerminalTask(t.status)
    ? "working"
    : t.status === "succeeded"
      ? "completed"
      : t.status === "cancelled"
        ? "cancelled"
        : "failed";
  const updated = Math.max(t.createdAt, t.startedAt ?? 0, t.lastEventAt ?? 0, t.endedAt ?? 0);
  return {
    taskId: t.runId,
    status,
    statusMessage: t.error ? `Task ${t.status}: ${t.error}` : `Task ${t.status}`,
    createdAt: new Date(t.createdAt).toISOString(),
    lastUpdatedAt: new Date(updated).toISOString(),
    ttl: null,
    pollInterval: MCP_TASKS.pollIntervalMs,
  };
}

/** One page of the caller's tasks, newest first, and the cursor of the next page when there is one. */
export async function listCallerTasks(ctx: ToolContext, cursor: string | undefined) {
  const before = cursor === undefined ? undefined : decodeCursor(cursor);
  const page = await pageTasksOf(ctx.env, ctx.caller.sessionKey, before, MCP_TASK_PAGE);
  const tasks = page.tasks.flatMap((t) => (t.runId ? [taskOfRecord({ ...t, runId: t.runId })] : []));
  return { tasks, ...(page.nextSeq !== undefined ? { nextCursor: encodeCursor(page.nextSeq) } : {}) };
}

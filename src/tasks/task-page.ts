import type { SessionHost } from "../session/host";
import { recordOf, type TaskRow } from "./task-store";
import type { TaskRecord } from "./task-types";

/**
 * The ledger paged by a stable position (MCP `tasks/list`, docs/protocols.md): the tasks that have a run —
 * the run id is the handle every protocol polls — newest recorded first. A row's position is its rowid, which
 * only grows as tasks are recorded, so a cursor stays meaningful while tasks change status or end (the
 * `updated_at` order of `list` moves under a reader). A seek on the table's own key: the cost is the page.
 */

/** Tasks one page holds at most (docs/limits.md). */
export const TASK_PAGE_MAX = 50;

export interface TaskPage {
  tasks: TaskRecord[];
  /** The position to pass as `beforeSeq` for the next page; absent on the last one. */
  nextSeq?: number;
}

export function pageTasks(host: SessionHost, arg: { beforeSeq?: number; limit: number }): TaskPage {
  // A session that never wrote anything has no ledger, and reading it must not create one.
  if (!host.hasStorage || host.meta === null) return { tasks: [] };
  const limit = Math.max(1, Math.min(TASK_PAGE_MAX, Math.floor(arg.limit)));
  const before = arg.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  // One row past the page says whether another page follows.
  const rows = host.sql
    .exec<TaskRow & { seq: number }>(
      "SELECT rowid AS seq, * FROM tasks WHERE rowid < ? AND run_id IS NOT NULL ORDER BY rowid DESC LIMIT ?",
      before,
      limit + 1,
    )
    .toArray();
  const page = rows.slice(0, limit);
  return {
    tasks: page.map((r) => recordOf(host.key, r)),
    ...(rows.length > limit ? { nextSeq: page[page.length - 1].seq } : {}),
  };
}

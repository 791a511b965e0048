// The session's ledger tasks as the page holds them: read once with the page, then moved by the session
// stream's `task` events (docs/events.md), never polled. Bounded: the newest TASKS_SHOWN.
import type { Task } from "./types";

/** Tasks the page shows at most (docs/tasks.md); `more` says the ledger holds others. */
export const TASKS_SHOWN = 50;
/** How far back the first read goes: a week, as long as the ledger keeps an ended task. */
export const TASKS_RECENT_MINUTES = 10_080;

export interface TaskList {
  tasks: Task[];
  /** The ledger holds more tasks than are shown. */
  more: boolean;
}

export const NO_TASKS: TaskList = { tasks: [], more: false };

const newestFirst = (a: Task, b: Task) => b.createdAt - a.createdAt || (a.taskId < b.taskId ? -1 : 1);

/** The first read: `read` asked for one more than is shown, so a full page says there are more. */
export function listOf(read: Task[]): TaskList {
  const tasks = [...read].sort(newestFirst);
  return { tasks: tasks.slice(0, TASKS_SHOWN), more: tasks.length > TASKS_SHOWN };
}

/** A `task` event: the task as it is now replaces what is held (a new one joins; past the bound the oldest goes). */
export function upsertTask(held: TaskList, task: Task): TaskList {
  const others = held.tasks.filter((t) => t.taskId !== task.taskId);
  const isNew = others.length === held.tasks.length;
  const tasks = [...others, task].sort(newestFirst);
  return { tasks: tasks.slice(0, TASKS_SHOWN), more: held.more || (isNew && tasks.length > TASKS_SHOWN) };
}

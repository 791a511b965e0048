import { taskChange } from "../events/state-kinds";
import type { SessionHost } from "../session/host";
import { recordOf, type TaskRow } from "./task-store";

/**
 * A ledger change on the session's event stream (docs/events.md, `task`): written by createTask/updateTask
 * (task-api.ts) inside the transaction that changed the row, so the live stream, `changesSince` and the
 * ledger never disagree, whatever runtime (sub-agent, yield, send) the task belongs to. A status move is also
 * a state change (`task_changed`); a change only of what a reader sees beside it (delivery, outcome, run,
 * model, tokens) is an event alone; a write that changes nothing a reader sees (the sweep's activity stamp,
 * a repeated report) sends nothing, so a retried report never repeats an event.
 */

/** What a reader of the task sees, without the stamps every write moves. */
function visible(row: TaskRow): string {
  const { updated_at: _u, last_event_at: _l, ...rest } = row;
  return JSON.stringify(rest);
}

/** `before`: the row before the write (undefined for a task just recorded); `after`: the row now. */
export function publishTaskChange(host: SessionHost, before: TaskRow | undefined, after: TaskRow, now: number): void {
  if (before && visible(before) === visible(after)) return;
  const moved = !before || before.status !== after.status;
  const record = recordOf(host.key, after);
  host.events.task(record, moved ? taskChange(record, now) : null);
}

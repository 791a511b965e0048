// The session's ledger tasks (docs/tasks.md) as a table: any runtime's task alike — its kind, what it is,
// its status and times — kept current by the session stream's `task` events (session-data.ts), with a
// Cancel button for each open task. The cancel is the page's token's own request: the server decides
// whether that token may (a run token may not, src/http/scopes.ts), and a refusal is shown, never worked around.
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";
import { ErrorLine } from "./errors";
import { when } from "./format";
import { sessionHref } from "./router";
import type { SessionData } from "./session-data";
import { RowsHead, StatusBadge } from "./table-parts";
import { TASKS_SHOWN } from "./task-list";
import { TASK_OPEN, type Task } from "./types";

/** A task's text is cut here in the table; the whole text is its cell's title. */
const TEXT_CHARS = 160;

const cut = (text: string) => (text.length <= TEXT_CHARS ? text : `${text.slice(0, TEXT_CHARS - 1)}…`);

function outcomeOf(t: Task): string {
  return t.error ?? t.terminalSummary ?? (t.terminalOutcome === "blocked" ? "result not delivered" : "");
}

export function TasksTable(props: { data: SessionData }) {
  const [error, setError] = useState<unknown>(null);
  // Once the server refused this token a cancel, the buttons go: every other one would be refused too.
  const [refused, setRefused] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const { tasks, more } = props.data.tasks;
  const { showTasks } = props.data;
  useEffect(showTasks, [showTasks]);

  async function cancel(t: Task) {
    setBusy(t.taskId);
    setError(null);
    try {
      const answer = await props.data.cancelTask(t.taskId);
      if (!answer.cancelled) setError(answer.reason ?? "The task was not cancelled.");
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) setRefused(err.message);
      else setError(err);
    } finally {
      setBusy(null);
    }
  }

  return (
    <section aria-labelledby="tasks-title">
      <h2 id="tasks-title">Tasks</h2>
      <ErrorLine error={error} />
      {refused && <p class="meta">This token may not cancel tasks ({refused}).</p>}
      {tasks.length === 0 ? (
        <p>No tasks recorded by this session.</p>
      ) : (
        <table class="rows tasks" data-testid="tasks">
          <RowsHead columns={["Kind", "Task", "Status", "Created", "Started", "Ended", "Outcome"]} actions={!refused} />
          <tbody>
            {tasks.map((t) => (
              <tr key={t.taskId} data-task={t.taskId} data-status={t.status}>
                <td data-label="Kind">{t.runtime}</td>
                <td data-label="Task" title={t.task}>
                  {t.label && <strong>{t.label}</strong>}
                  {t.label && <br />}
                  {cut(t.task)}
                  {t.childSessionKey && (
                    <>
                      <br />
                      <a href={sessionHref(t.childSessionKey, "subagents")} class="meta">
                        {t.childSessionKey}
                      </a>
                    </>
                  )}
                </td>
                <td data-label="Status">
                  <StatusBadge status={t.status} />
                </td>
                <td data-label="Created">{when(t.createdAt)}</td>
                <td data-label="Started">{when(t.startedAt)}</td>
                <td data-label="Ended">{when(t.endedAt)}</td>
                <td data-label="Outcome">{cut(outcomeOf(t))}</td>
                {!refused && (
                  <td>
                    {TASK_OPEN.has(t.status) && (
                      <button
                        type="button"
                        aria-label={`Cancel task ${t.label ?? t.taskId}`}
                        disabled={busy === t.taskId}
                        onClick={() => cancel(t)}
                      >
                        Cancel
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {more && (
        <p class="meta" data-testid="tasks-more">
          Only the newest {TASKS_SHOWN} tasks are shown; the ledger holds more (GET /v1/sessions/…/tasks).
        </p>
      )}
    </section>
  );
}

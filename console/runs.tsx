import { useState } from "preact/hooks";
import { ErrorLine } from "./errors";
import { when } from "./format";
import type { SessionData } from "./session-data";
import { RUN_ENDED } from "./types";

export function RunsTab(props: { data: SessionData }) {
  const [error, setError] = useState<unknown>(null);
  const { runs } = props.data;
  if (runs.length === 0) return <p>No runs yet.</p>;
  return (
    <>
      <ErrorLine error={error} />
      <table class="rows runs">
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Kind</th>
            <th scope="col">Status</th>
            <th scope="col">Created</th>
            <th scope="col">Outcome</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => (
            <tr key={r.runId}>
              <td data-label="Run">
                <code>{r.runId}</code>
              </td>
              <td data-label="Kind">{r.kind}</td>
              <td data-label="Status">
                <span class={`status status-${r.status}`}>{r.status}</span>
              </td>
              <td data-label="Created">{when(r.createdAt)}</td>
              <td data-label="Outcome">{r.error ?? r.reply ?? ""}</td>
              <td>
                {!RUN_ENDED.has(r.status) && (
                  <button
                    type="button"
                    aria-label={`Abort run ${r.runId}`}
                    onClick={() => props.data.abort(r.runId).catch(setError)}
                  >
                    Abort
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

import { useState } from "preact/hooks";
import { ErrorLine } from "./errors";
import { when } from "./format";
import type { SessionData } from "./session-data";
import { RowsHead, StatusBadge } from "./table-parts";
import { RUN_ENDED } from "./types";

export function RunsTab(props: { data: SessionData }) {
  const [error, setError] = useState<unknown>(null);
  const { runs } = props.data;
  if (runs.length === 0) return <p>No runs yet.</p>;
  return (
    <>
      <ErrorLine error={error} />
      <table class="rows runs">
        <RowsHead columns={["Run", "Kind", "Status", "Created", "Outcome"]} actions />
        <tbody>
          {runs.map((r) => (
            <tr key={r.runId}>
              <td data-label="Run">
                <code>{r.runId}</code>
              </td>
              <td data-label="Kind">{r.kind}</td>
              <td data-label="Status">
                <StatusBadge status={r.status} />
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

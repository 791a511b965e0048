// The session's status card: the session_status tool (docs/contract.md), called as the session itself,
// read again whenever one of its runs changes status (the live stream moves `runs`).
import { api } from "./api";
import { ErrorLine } from "./errors";
import type { SessionData } from "./session-data";
import { useRead } from "./use-read";

type StatusDetails = { ok: true; statusText: string; stateVersion: number } | { status: "error"; error: string };

export function StatusTab(props: { sessionKey: string; data: SessionData }) {
  const runs = props.data.runs.map((r) => `${r.runId}:${r.status}`).join(",");
  const { value, error } = useRead(
    () =>
      api<{ result: { details: StatusDetails } }>("POST", "/tools/invoke", {
        tool: "session_status",
        sessionKey: props.sessionKey,
        args: {},
      }).then((r) => r.result.details),
    [props.sessionKey, runs],
  );
  return (
    <>
      <ErrorLine error={error} />
      {value && "statusText" in value && (
        <pre class="status-card" data-testid="status-card">
          {value.statusText}
        </pre>
      )}
      {value && "error" in value && (
        <p role="alert" class="error">
          {value.error}
        </p>
      )}
    </>
  );
}

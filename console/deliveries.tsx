import { useCallback, useEffect, useState } from "preact/hooks";
import { api, enc } from "./api";
import { ErrorLine } from "./errors";
import { when } from "./format";
import { RowsHead, StatusBadge } from "./table-parts";
import type { DeadTimer, Delivery } from "./types";

const STATUSES = ["all", "pending", "delivered", "dead", "blocked"] as const;

/** The session's outbox and its dead timers, with retry (src/http/routes/session-records.ts). */
export function DeliveriesTab(props: { sessionKey: string; version: number }) {
  const base = `/v1/sessions/${enc(props.sessionKey)}`;
  const [status, setStatus] = useState<(typeof STATUSES)[number]>("all");
  const [deliveries, setDeliveries] = useState<Delivery[] | null>(null);
  const [timers, setTimers] = useState<DeadTimer[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState("");

  const load = useCallback(async () => {
    const q = status === "all" ? "" : `&status=${status}`;
    const [d, t] = await Promise.all([
      api<{ deliveries: Delivery[] }>("GET", `${base}/deliveries?limit=100${q}`),
      api<{ timers: DeadTimer[] }>("GET", `${base}/timers/dead?limit=100`),
    ]);
    setDeliveries(d.deliveries);
    setTimers(t.timers);
  }, [base, status]);

  // `version` changes with every delivery event of the session stream.
  useEffect(() => {
    load().catch(setError);
  }, [load, props.version]);

  async function retry(what: string, path: string) {
    setError(null);
    try {
      await api("POST", path);
      setNotice(`${what} re-queued.`);
      await load();
    } catch (err) {
      setError(err);
    }
  }

  return (
    <div class="deliveries">
      <label>
        Status{" "}
        <select value={status} onChange={(e) => setStatus(e.currentTarget.value as typeof status)}>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <button type="button" onClick={() => load().catch(setError)}>
        Refresh
      </button>
      <p role="status">{notice}</p>
      <ErrorLine error={error} />
      <h2>Deliveries</h2>
      {deliveries?.length === 0 && <p>No deliveries.</p>}
      {deliveries && deliveries.length > 0 && (
        <table class="rows">
          <RowsHead columns={["Delivery", "Status", "Channel", "Attempts", "Last error", "Updated"]} actions />
          <tbody>
            {deliveries.map((d) => (
              <tr key={d.id} data-delivery={d.id}>
                <td data-label="Delivery">
                  {d.kind} → {d.payload.to ?? "—"}: {d.payload.message.slice(0, 120)}
                </td>
                <td data-label="Status">
                  <StatusBadge status={d.status} />
                </td>
                <td data-label="Channel">{d.channel}</td>
                <td data-label="Attempts">{d.attempts}</td>
                <td data-label="Last error">{d.lastError ?? ""}</td>
                <td data-label="Updated">{when(d.deliveredAt ?? d.updatedAt)}</td>
                <RetryCell
                  show={d.status === "dead" || d.status === "blocked"}
                  label={`Retry delivery ${d.id}`}
                  onRetry={() => retry("Delivery", `${base}/deliveries/${enc(d.id)}/retry`)}
                />
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Dead timers</h2>
      {timers.length === 0 && <p>No dead timers.</p>}
      {timers.length > 0 && (
        <table class="rows">
          <RowsHead columns={["Timer", "Attempts", "Last error", "Died"]} actions />
          <tbody>
            {timers.map((t) => (
              <tr key={`${t.kind}/${t.ref}`}>
                <td data-label="Timer">
                  {t.kind}/{t.ref}
                </td>
                <td data-label="Attempts">{t.attempts}</td>
                <td data-label="Last error">{t.lastError}</td>
                <td data-label="Died">{when(t.diedAt)}</td>
                <RetryCell
                  show={t.retryable}
                  label={`Retry timer ${t.kind}/${t.ref}`}
                  onRetry={() => retry("Timer", `${base}/timers/dead/${enc(t.kind)}/${enc(t.ref)}/retry`)}
                />
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** The actions cell of a row that may be retried: a named Retry button, or nothing. */
function RetryCell(props: { show: boolean; label: string; onRetry: () => void }) {
  return (
    <td>
      {props.show && (
        <button type="button" aria-label={props.label} onClick={props.onRetry}>
          Retry
        </button>
      )}
    </td>
  );
}

import { DeliveriesTab } from "./deliveries";
import { ErrorLine } from "./errors";
import { ExchangeTab } from "./exchange";
import { SESSION_TABS, type SessionTab, sessionHref } from "./router";
import { RunsTab } from "./runs";
import { useSessionData } from "./session-data";
import { SettingsTab } from "./settings";
import { StatusTab } from "./status";
import { TranscriptTab } from "./transcript";
import { SubagentsTab } from "./tree";

const TAB_LABELS: Record<SessionTab, string> = {
  transcript: "Transcript",
  runs: "Runs",
  subagents: "Sub-agents & tasks",
  exchanges: "Exchanges",
  deliveries: "Deliveries",
  settings: "Label & policy",
  status: "Status",
};

const STREAM_LABELS = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  unavailable: "not streaming (refreshes after changes)",
  deleted: "session deleted",
  archived: "session archived",
};

export function SessionPage(props: { sessionKey: string; tab: SessionTab }) {
  const data = useSessionData(props.sessionKey);
  const row = data.row;
  return (
    <section aria-labelledby="session-title">
      <p>
        <a href="#/sessions">← Sessions</a>
      </p>
      <h1 id="session-title">{row?.label ? `${row.label} — ${props.sessionKey}` : props.sessionKey}</h1>
      <p class="meta">
        {row ? `${row.kind} · ${row.channel} · ${row.model ?? "default model"} · ${row.totalTokens} tokens` : ""}{" "}
        <span class={`stream stream-${data.stream}`} data-testid="stream-state" role="status" aria-live="polite">
          {STREAM_LABELS[data.stream]}
        </span>
      </p>
      <ErrorLine error={data.error} />
      <nav class="tabs" aria-label="Session">
        {SESSION_TABS.map((t) => (
          <a key={t} href={sessionHref(props.sessionKey, t)} aria-current={t === props.tab ? "page" : undefined}>
            {TAB_LABELS[t]}
          </a>
        ))}
      </nav>
      {props.tab === "transcript" && <TranscriptTab data={data} />}
      {props.tab === "runs" && <RunsTab data={data} />}
      {props.tab === "subagents" && <SubagentsTab sessionKey={props.sessionKey} data={data} />}
      {props.tab === "exchanges" && <ExchangeTab sessionKey={props.sessionKey} data={data} />}
      {props.tab === "deliveries" && <DeliveriesTab sessionKey={props.sessionKey} version={data.deliveriesVersion} />}
      {props.tab === "settings" && <SettingsTab key={row?.sessionId ?? "loading"} data={data} />}
      {props.tab === "status" && <StatusTab sessionKey={props.sessionKey} data={data} />}
    </section>
  );
}

import { useState } from "preact/hooks";
import { ErrorLine } from "./errors";
import { messageText, when } from "./format";
import type { RunStreamState } from "./live";
import type { SessionData } from "./session-data";

/** Worded as the session stream's indicator (console/session.tsx). */
const RUN_STREAM_LABELS: Record<RunStreamState, string> = { live: "live", reconnecting: "reconnecting…" };

export function TranscriptTab(props: { data: SessionData }) {
  const { messages, drafts } = props.data;
  return (
    <>
      <ol class="transcript" aria-live="polite" aria-label="Transcript">
        {messages.map((m, i) => (
          <li key={m.__switchboard?.seq ?? `u${i}`} class={`msg msg-${m.role}`} data-role={m.role}>
            <span class="who">
              {m.role} · {when(m.timestamp)}
            </span>
            <p>{messageText(m.content)}</p>
          </li>
        ))}
        {Object.entries(drafts).map(([runId, draft]) => (
          <li key={runId} class="msg msg-assistant draft" data-role="draft">
            <span class="who">
              assistant · generating…{" "}
              <span
                class={`stream stream-${draft.stream}`}
                data-testid="run-stream-state"
                role="status"
                aria-live="polite"
              >
                {RUN_STREAM_LABELS[draft.stream]}
              </span>
            </span>
            <p>{draft.text}</p>
          </li>
        ))}
      </ol>
      {messages.length === 0 && Object.keys(drafts).length === 0 && <p>No messages yet.</p>}
      <SendForm send={props.data.send} />
    </>
  );
}

function SendForm(props: { send: (message: string) => Promise<void> }) {
  const [message, setMessage] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function submit(e: Event) {
    e.preventDefault();
    if (!message.trim()) return;
    setBusy(true);
    setError(null);
    try {
      await props.send(message);
      setMessage("");
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <form class="send" onSubmit={submit}>
      <label for="message">Message</label>
      <textarea id="message" rows={3} value={message} onInput={(e) => setMessage(e.currentTarget.value)} />
      <button type="submit" disabled={busy || !message.trim()}>
        Send
      </button>
      <ErrorLine error={error} />
    </form>
  );
}

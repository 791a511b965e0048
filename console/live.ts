// Live updates of one session (docs/events.md): the session stream, resumed by Last-Event-ID after a
// dropped connection, so nothing is missed or repeated.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, enc } from "./api";
import { readEvents, type SseEvent } from "./sse";

/**
 * `unavailable`: the Worker refused the stream (no such route yet, or no session yet); callers poll instead.
 * `deleted` / `archived`: the stream ended with the server's `end` event (docs/events.md); there is nothing
 * to reconnect to until a session is created again under the key.
 */
export type StreamState = "connecting" | "live" | "reconnecting" | "unavailable" | "deleted" | "archived";

const RETRY_MS = [1000, 2000, 5000, 10000];

/**
 * `onOpen` runs each time the stream is accepted, `resumed` when it carried a Last-Event-ID: that stream
 * replays everything after the last event seen, so there is nothing to re-read. A stream without a resume
 * point starts with events after the request (docs/events.md), so whatever happened before is read then,
 * never before the stream is open.
 */
export function useSessionStream(
  key: string,
  onEvent: (e: SseEvent) => void,
  onOpen: (resumed: boolean) => void,
  reconnectSignal: number,
): StreamState {
  const [state, setState] = useState<StreamState>("connecting");
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const opened = useRef(onOpen);
  opened.current = onOpen;
  const lastEventId = useRef<string | undefined>(undefined);

  useEffect(() => {
    const abort = new AbortController();
    let failures = 0;
    let ended: "deleted" | "archived" | null = null;
    (async () => {
      while (!abort.signal.aborted) {
        try {
          setState(failures ? "reconnecting" : "connecting");
          const resumeAfter = lastEventId.current;
          await readEvents(`/v1/sessions/${enc(key)}/events`, {
            lastEventId: resumeAfter,
            signal: abort.signal,
            onOpen: () => {
              setState("live");
              failures = 0;
              opened.current(resumeAfter !== undefined);
            },
            onEvent: (e) => {
              if (e.id !== undefined) lastEventId.current = e.id;
              if (e.event === "end") ended = JSON.parse(e.data).reason === "archived" ? "archived" : "deleted";
              handler.current(e);
            },
          });
          // The server's last word: reconnecting would only meet a 404, again and again.
          if (ended) return setState(ended);
        } catch (err) {
          if (abort.signal.aborted) return;
          // A 4xx will not heal by retrying; 429 (too many watchers) and 5xx may.
          if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) {
            setState("unavailable");
            return;
          }
        }
        if (abort.signal.aborted) return;
        setState("reconnecting");
        await new Promise((r) => setTimeout(r, RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)]));
      }
    })();
    return () => abort.abort();
  }, [key, reconnectSignal]);

  return state;
}

/**
 * The run's text as it is generated (GET /v1/runs/{id}/events), handed to `onText` as it grows; resolves
 * with the final status. Rejects with an ApiError when the Worker has no such stream.
 */
export async function followRun(
  runId: string,
  signal: AbortSignal,
  onText: (text: string) => void,
): Promise<{ status: string; reply?: string; error?: string }> {
  let text = "";
  let final: { status: string; reply?: string; error?: string } | null = null;
  await readEvents(`/v1/runs/${enc(runId)}/events`, {
    signal,
    onEvent: (e) => {
      const data = JSON.parse(e.data);
      if (e.event === "delta") {
        text += data.text ?? "";
        onText(text);
      } else if (e.event === "reset") {
        // The stream starts over (docs/events.md): the next delta carries the text so far.
        text = "";
        onText(text);
      } else if (e.event === "status") final = data;
      else if (e.event === "end") final = { status: "aborted", error: `session ${data.reason}` };
    },
  });
  return final ?? { status: "unknown" };
}

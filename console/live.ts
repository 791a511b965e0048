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
        // The stream reached its maximum lifetime (docs/events.md): resumed at once, not a failure.
        let renew = false;
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
              if (e.event === "end") {
                const reason = JSON.parse(e.data).reason;
                if (reason === "lifetime") renew = true;
                else ended = reason === "archived" ? "archived" : "deleted";
              }
              handler.current(e);
            },
          });
          // The server's last word: reconnecting would only meet a 404, again and again.
          if (ended) return setState(ended);
          if (renew) continue;
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

/** How a run's own stream is doing: `live` while connected, `reconnecting` after a drop until it is back. */
export type RunStreamState = "live" | "reconnecting";

/**
 * Consecutive failed reconnects before a run's stream is given up (with RETRY_MS ≈ 3 min): the caller then
 * waits for the run's end by other means. A run that outlives this has lost its live view, not its result.
 */
const RUN_RECONNECTS = 20;

export interface RunEnd {
  status: string;
  reply?: string;
  error?: string;
}

/**
 * The run's text as it is generated (GET /v1/runs/{id}/events), handed to `onText` as it grows; resolves
 * with the final status (`status`, or `end` when the session went away). A dropped stream is reconnected
 * with the last event id seen, so the server continues after it: no text twice, none missed
 * (docs/events.md). When the server cannot continue there it sends `reset` and the text so far.
 * Rejects with an ApiError when the Worker refuses the stream, or after RUN_RECONNECTS failed reconnects.
 */
export async function followRun(
  runId: string,
  signal: AbortSignal,
  onText: (text: string) => void,
  onState: (state: RunStreamState) => void = () => {},
): Promise<RunEnd> {
  let text = "";
  let final: RunEnd | null = null;
  let lastEventId: string | undefined;
  let failures = 0;
  for (;;) {
    let renew = false;
    try {
      await readEvents(`/v1/runs/${enc(runId)}/events`, {
        lastEventId,
        signal,
        onOpen: () => onState("live"),
        onEvent: (e) => {
          // Only an event is progress: a stream that is accepted and then closes with nothing still
          // counts towards RUN_RECONNECTS, so a server that keeps doing that is not retried forever.
          failures = 0;
          if (e.id !== undefined) lastEventId = e.id;
          const data = JSON.parse(e.data);
          if (e.event === "delta") {
            text += data.text ?? "";
            onText(text);
          } else if (e.event === "reset") {
            // The stream starts over (docs/events.md): the next delta carries the text so far.
            text = "";
            onText(text);
          } else if (e.event === "status") final = data;
          // `lifetime`: the stream reached its maximum life, not the run its end; resumed below.
          else if (e.event === "end" && data.reason === "lifetime") renew = true;
          else if (e.event === "end") final = { status: "aborted", error: `session ${data.reason}` };
        },
      });
      // `status` and `end` are the stream's last events; a stream that closed before either was dropped.
      if (final) return final;
      if (renew) continue;
    } catch (err) {
      if (signal.aborted) throw err;
      // A 4xx will not heal by retrying; 429 (too many watchers) and 5xx may.
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) throw err;
      if (final) return final;
    }
    if (failures >= RUN_RECONNECTS) throw new Error(`run ${runId}: its event stream could not be reconnected`);
    onState("reconnecting");
    await pause(RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)], signal);
    signal.throwIfAborted();
  }
}

/** Wait `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

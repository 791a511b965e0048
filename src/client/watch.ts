import { EventSourceParserStream } from "eventsource-parser/stream";
import { apiErrorOf } from "./errors";

/**
 * Following the gateway's event streams (docs/events.md) from any runtime with `fetch`: each event parsed
 * (its `data` as JSON), the stream resumed after a dropped connection with `Last-Event-ID` — nothing missed,
 * nothing twice — and ended by the stream's own last word (`end`, and a run's final `status`); an `end` for
 * the stream's maximum lifetime (`lifetime`) is resumed at once.
 */

export interface StreamEvent<T = unknown> {
  /** Resume point: hand it back as `lastEventId` to continue after this event. Absent on `gap`/`reset`/`end`. */
  id?: string;
  event: string;
  data: T;
}

export interface WatchOptions {
  /** Continue after this event id (`"0"`: everything the gateway retains); default: from now. */
  lastEventId?: string;
  /** Stop watching. */
  signal?: AbortSignal;
  /**
   * Reconnects in a row without an event in between before giving up (default 5; 0 = never reconnect).
   * Waits 0.5 s, 1 s, 2 s, … (at most 10 s) between attempts.
   */
  maxReconnects?: number;
}

const endReason = (e: StreamEvent) => (e.data as { reason?: string } | null)?.reason;

/**
 * The events that end a stream: nothing follows them, so no reconnect is tried. Not `end {reason: "lifetime"}`:
 * the stream reached its maximum life (docs/events.md), and the watch resumes after it with `Last-Event-ID`.
 */
const FINAL = (e: StreamEvent) =>
  (e.event === "end" && endReason(e) !== "lifetime") ||
  (e.event === "status" && (e.data as { status?: string } | null)?.status !== undefined);
const RENEW = (e: StreamEvent) => e.event === "end" && endReason(e) === "lifetime";

/** One parsed event stream; reconnects (bounded) until a final event, the caller's abort, or an error answer. */
export async function* watchEvents(
  open: (lastEventId: string | undefined, signal: AbortSignal | undefined) => Promise<Response>,
  opts: WatchOptions = {},
): AsyncGenerator<StreamEvent> {
  let lastEventId = opts.lastEventId;
  let failures = 0;
  const maxReconnects = opts.maxReconnects ?? 5;
  for (;;) {
    if (opts.signal?.aborted) return;
    let res: Response;
    try {
      res = await open(lastEventId, opts.signal);
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (++failures > maxReconnects) throw err;
      await pause(failures, opts.signal);
      continue;
    }
    // An answer that is not a stream (403, 404 for a deleted session, 429 with 200 watchers) is final.
    if (!res.ok || !res.body) throw await apiErrorOf(res);
    const reader = res.body
      .pipeThrough(new TextDecoderStream())
      // One event is at most a transcript message the gateway bounds (docs/limits.md); 8 MiB leaves room.
      .pipeThrough(new EventSourceParserStream({ maxBufferSize: 8 * 1024 * 1024 }))
      .getReader();
    let renew = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const event: StreamEvent = { event: value.event ?? "message", data: parseData(value.data) };
        if (value.id) {
          event.id = value.id;
          lastEventId = value.id;
        }
        failures = 0;
        yield event;
        if (FINAL(event)) return;
        if (RENEW(event)) {
          renew = true;
          break;
        }
      }
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (failures >= maxReconnects) throw err;
    } finally {
      // Also when the caller stops early (break, return): the connection is closed, not left open.
      await reader.cancel().catch(() => {});
    }
    // A stream at its maximum lifetime: resumed at once, and not a failure.
    if (renew) continue;
    // The connection ended without a final event (a proxy closed it, the network dropped): resume.
    if (++failures > maxReconnects) throw new Error(`event stream closed ${failures} times in a row`);
    await pause(failures, opts.signal);
  }
}

function parseData(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}

function pause(attempt: number, signal?: AbortSignal): Promise<void> {
  const ms = Math.min(10_000, 500 * 2 ** (attempt - 1));
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

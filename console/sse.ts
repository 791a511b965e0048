// Server-sent events over fetch(): EventSource cannot send the Authorization header (docs/events.md).
import { EventSourceParserStream } from "eventsource-parser/stream";
import { authHeaders, errorOf } from "./api";

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Most characters buffered for one event; a longer one means a broken server, and the stream is dropped. */
const MAX_EVENT_CHARS = 4 * 1024 * 1024;

/**
 * Read one event stream until it ends, `signal` aborts, or the server refuses it (the ApiError is
 * thrown). `onOpen` runs once the server accepted the stream; `onEvent` gets each complete event;
 * comment lines (`: ping`) are skipped. Parsed by eventsource-parser.
 */
export async function readEvents(
  path: string,
  opts: { lastEventId?: string; signal: AbortSignal; onOpen?: () => void; onEvent: (e: SseEvent) => void },
): Promise<void> {
  const headers: Record<string, string> = { ...authHeaders(), Accept: "text/event-stream" };
  if (opts.lastEventId !== undefined) headers["Last-Event-ID"] = opts.lastEventId;
  const res = await fetch(path, { headers, signal: opts.signal });
  if (!res.ok || !res.body) throw await errorOf(res);
  opts.onOpen?.();
  const events = res.body
    .pipeThrough(new TextDecoderStream())
    // Past the limit the stream errors, and the read below throws.
    .pipeThrough(new EventSourceParserStream({ maxBufferSize: MAX_EVENT_CHARS }))
    .getReader();
  for (;;) {
    const { value, done } = await events.read();
    if (done) return;
    opts.onEvent({ id: value.id, event: value.event ?? "message", data: value.data });
  }
}

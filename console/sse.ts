// Server-sent events over fetch(): EventSource cannot send the Authorization header (docs/events.md).
import { authHeaders, errorOf } from "./api";

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** Longest line accepted from a stream; a longer one means a broken server, and the stream is dropped. */
const MAX_LINE_CHARS = 4 * 1024 * 1024;

/**
 * Read one event stream until it ends, `signal` aborts, or the server refuses it (the ApiError is
 * thrown). `onOpen` runs once the server accepted the stream; `onEvent` gets each complete event;
 * comment lines (`: ping`) are skipped.
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
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let current: Partial<SseEvent> & { data?: string } = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    if (buffer.length > MAX_LINE_CHARS && !buffer.includes("\n")) throw new Error("event stream line too long");
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, "");
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf("\n");
      if (line === "") {
        if (current.data !== undefined)
          opts.onEvent({ id: current.id, event: current.event ?? "message", data: current.data });
        current = {};
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") current.data = current.data === undefined ? val : `${current.data}\n${val}`;
      else if (field === "event") current.event = val;
      else if (field === "id") current.id = val;
    }
  }
}

import { SwitchboardError } from "../errors";
import { sseBlock } from "./event-log";
import { heartbeatTimer } from "./heartbeat-timer";
import { EVENT_LIMITS, MORE, NEXT } from "./limits";

/**
 * The Worker's half of an event stream: one WebSocket to the session object in, one SSE response out
 * (docs/events.md). The response's queue is bounded in bytes: a reader that lets more than
 * `watcherBufferBytes` pile up is dropped (the stream ends; it resumes with `Last-Event-ID`), so a
 * slow reader never costs unbounded memory. Replay pages are only asked for when the queue has room.
 */
export async function eventStreamResponse(upgrade: Promise<Response>): Promise<Response> {
  const res = await upgrade;
  const ws = res.webSocket;
  if (res.status !== 101 || !ws) {
    const body = (await res.json().catch(() => null)) as { error?: { type?: string; message?: string } } | null;
    const type = (body?.error?.type ?? "internal_error") as ConstructorParameters<typeof SwitchboardError>[0];
    throw new SwitchboardError(type, body?.error?.message ?? "event stream unavailable");
  }
  ws.accept();
  const encoder = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;
  let pageOwed = false;
  const stopHeartbeat = heartbeatTimer.every(EVENT_LIMITS.heartbeatMs, () => push(": ping\n\n"));
  let stopLifetime = () => {};

  const end = (reason: string) => {
    if (ended) return;
    ended = true;
    stopHeartbeat();
    stopLifetime();
    try {
      ws.close(1000, reason);
    } catch {
      /* already closed */
    }
    try {
      controller.close();
    } catch {
      /* cancelled */
    }
  };
  const push = (text: string) => {
    if (ended) return;
    controller.enqueue(encoder.encode(text));
    // Past the bound the reader is not keeping up: drop it rather than buffer without limit (docs/limits.md).
    if ((controller.desiredSize ?? 0) < 0) end("slow reader");
  };

  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        if (pageOwed && !ended) {
          pageOwed = false;
          ws.send(NEXT);
        }
      },
      cancel() {
        end("reader gone");
      },
    },
    { highWaterMark: EVENT_LIMITS.watcherBufferBytes, size: (chunk) => chunk.byteLength },
  );

  // Authorized once, at connect: a stream may not outlive its authority for long. At its maximum lifetime it
  // says so and ends; the client reconnects (and is authorized again) with Last-Event-ID (docs/events.md).
  stopLifetime = heartbeatTimer.after(EVENT_LIMITS.streamLifetimeMs, () => {
    push(sseBlock(null, "end", JSON.stringify({ reason: "lifetime" })));
    end("lifetime");
  });

  ws.addEventListener("message", (e) => {
    const text = typeof e.data === "string" ? e.data : new TextDecoder().decode(e.data);
    if (text === MORE) {
      if ((controller.desiredSize ?? 0) > 0) ws.send(NEXT);
      else pageOwed = true;
      return;
    }
    push(text);
  });
  ws.addEventListener("close", () => end("closed"));
  ws.addEventListener("error", () => end("error"));

  return new Response(body, {
    headers: {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      "X-Accel-Buffering": "no",
    },
  });
}

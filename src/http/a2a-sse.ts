/**
 * A streaming A2A method's answer as Server-Sent Events, for both bindings (src/http/routes/a2a.ts,
 * src/http/routes/a2a-rest.ts). The first item is awaited by the caller before answering, so a refusal
 * (unknown task, bad message) is a plain error answer, not a stream; after that each item is written as it
 * comes, pulled by the reader (a slow reader holds the run stream's own bounded buffer, src/events/sse-bridge.ts).
 */

/** One SSE event: `id:` when the item carries our event id (the resume point), then its data. */
export function sseEvent(data: unknown, eventId?: unknown, event?: string): string {
  return `${typeof eventId === "string" ? `id: ${eventId}\n` : ""}${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;
}

export function sseResponse<T>(
  first: IteratorResult<T>,
  stream: AsyncGenerator<T>,
  render: (item: T) => string,
  renderError: (err: unknown) => string,
): Response {
  const encoder = new TextEncoder();
  let pending: string | null = first.done ? null : render(first.value);
  let ended = Boolean(first.done);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pending !== null) {
        controller.enqueue(encoder.encode(pending));
        pending = null;
        return;
      }
      if (ended) {
        controller.close();
        return;
      }
      try {
        const next = await stream.next();
        if (next.done) controller.close();
        else controller.enqueue(encoder.encode(render(next.value)));
      } catch (err) {
        ended = true;
        controller.enqueue(encoder.encode(renderError(err)));
        controller.close();
      }
    },
    async cancel() {
      await stream.return(undefined);
    },
  });
  return new Response(body, {
    headers: {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      "X-Accel-Buffering": "no",
    },
  });
}

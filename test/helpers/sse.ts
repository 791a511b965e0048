import { exports } from "cloudflare:workers";
import { createParser } from "eventsource-parser";
import { GATEWAY } from "./http";

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/**
 * An open event stream read incrementally, as a browser's `fetch()` reader would, parsed by
 * eventsource-parser (the parser the console uses too): `next()` resolves with the next complete event
 * (comments such as `: ping` are counted in `comments`), null when the stream ended.
 */
export class SseReader {
  comments: string[] = [];
  /** What was parsed and not yet read, in stream order. */
  private readonly parsed: ({ event: SseEvent } | { comment: string })[] = [];
  private readonly parser = createParser({
    onEvent: (e) =>
      this.parsed.push({
        event: { ...(e.id !== undefined ? { id: e.id } : {}), event: e.event ?? "message", data: e.data },
      }),
    onComment: (text) => {
      this.comments.push(text.trim());
      this.parsed.push({ comment: text.trim() });
    },
  });
  private readonly decoder = new TextDecoder();
  private done = false;

  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  async next(): Promise<SseEvent | null> {
    for (;;) {
      for (let item = this.parsed.shift(); item; item = this.parsed.shift()) if ("event" in item) return item.event;
      if (this.done) return null;
      await this.pull();
    }
  }

  /** The next `n` events (fails if the stream ends first). */
  async takeN(n: number): Promise<SseEvent[]> {
    const out: SseEvent[] = [];
    while (out.length < n) {
      const e = await this.next();
      if (!e) throw new Error(`stream ended after ${out.length} of ${n} events`);
      out.push(e);
    }
    return out;
  }

  /** Every event until the stream ends. */
  async rest(): Promise<SseEvent[]> {
    const out: SseEvent[] = [];
    for (let e = await this.next(); e; e = await this.next()) out.push(e);
    return out;
  }

  /** Read until one comment line arrived (heartbeats); an event before it fails. */
  async nextComment(): Promise<string> {
    for (;;) {
      const item = this.parsed.shift();
      if (item && "event" in item) throw new Error(`expected a comment, got event ${item.event.event}`);
      if (item) return item.comment;
      if (this.done) throw new Error("stream ended");
      await this.pull();
    }
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }

  /** Feed the parser the next chunk of the stream. */
  private async pull(): Promise<void> {
    const { value, done } = await this.reader.read();
    if (done) {
      this.done = true;
      this.parser.feed(this.decoder.decode());
    } else this.parser.feed(this.decoder.decode(value, { stream: true }));
  }
}

/** Open an event stream through the Worker; the response for checking status and headers, and its reader. */
export async function openStream(
  path: string,
  opts: { token?: string; headers?: Record<string, string> } = {},
): Promise<{ res: Response; sse: SseReader }> {
  const res = await exports.default.fetch(`https://switchboard.test${path}`, {
    headers: { Authorization: `Bearer ${opts.token ?? GATEWAY}`, ...(opts.headers ?? {}) },
  });
  if (!res.body) throw new Error(`no body (${res.status})`);
  return { res, sse: new SseReader(res.body.getReader()) };
}

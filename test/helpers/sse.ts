import { exports } from "cloudflare:workers";
import { GATEWAY } from "./http";

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/**
 * An open event stream read incrementally, as a browser's `fetch()` reader would: `next()` resolves with
 * the next complete event (comments such as `: ping` are counted in `comments`), null when the stream ended.
 */
export class SseReader {
  comments: string[] = [];
  private buffer = "";
  private readonly decoder = new TextDecoder();
  private done = false;

  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  async next(): Promise<SseEvent | null> {
    for (;;) {
      const event = this.take();
      if (event) return event;
      if (this.done) return null;
      const { value, done } = await this.reader.read();
      if (done) this.done = true;
      else this.buffer += this.decoder.decode(value, { stream: true });
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

  /** Read until one comment line arrived (heartbeats). */
  async nextComment(): Promise<string> {
    const seen = this.comments.length;
    while (this.comments.length === seen) {
      const event = this.take();
      if (event) throw new Error(`expected a comment, got event ${event.event}`);
      const { value, done } = await this.reader.read();
      if (done) throw new Error("stream ended");
      this.buffer += this.decoder.decode(value, { stream: true });
      this.take(true);
    }
    return this.comments[seen];
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }

  /** Parse one complete block off the buffer (comment-only blocks are recorded and skipped). */
  private take(commentsOnly = false): SseEvent | null {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end < 0) return null;
      const block = this.buffer.slice(0, end);
      const lines = block.split("\n");
      const isComment = lines.every((l) => l.startsWith(":"));
      if (commentsOnly && !isComment) return null;
      this.buffer = this.buffer.slice(end + 2);
      const e: SseEvent = { event: "message", data: "" };
      const data: string[] = [];
      for (const line of lines) {
        if (line.startsWith(":")) this.comments.push(line.slice(1).trim());
        else if (line.startsWith("id: ")) e.id = line.slice(4);
        else if (line.startsWith("event: ")) e.event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (isComment) continue;
      e.data = data.join("\n");
      return e;
    }
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

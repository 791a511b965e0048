import { createServer, request as httpRequest, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createParser } from "eventsource-parser";

export const SESSION_STREAMS = /^\/v1\/sessions\/[^/]+\/events(\?|$)/;
export const RUN_STREAMS = /^\/v1\/runs\/[^/]+\/events(\?|$)/;

/**
 * A proxy in front of the Worker that can drop event streams (those whose path matches `streams`), as a
 * flaky network or a proxy closing a long connection would: `cut()` breaks the open ones (and says how
 * many); while `down`, every new one's connection is broken at once, so the page keeps trying to
 * reconnect. Other requests (the other kind of stream included) pass.
 */
export async function streamCutter(target: string, streams: RegExp = SESSION_STREAMS) {
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const isStream = streams.test(req.url ?? "");
    if (isStream && cutter.down) return void req.socket.destroy();
    const upstream = httpRequest(
      new URL(req.url ?? "/", target).href,
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.flushHeaders(); // an event stream's headers go out before its first event, which may be long
        up.pipe(res);
        if (isStream) {
          open.add(res);
          res.on("close", () => open.delete(res));
        }
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const cutter = {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    down: false,
    cut(): number {
      const n = open.size;
      for (const res of open) res.socket?.destroy();
      return n;
    },
    close: () => {
      cutter.cut();
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
  return cutter;
}

/**
 * The first `delta` of a fresh watcher of the run (no resume point): the text so far, as the Worker holds
 * it. Read with eventsource-parser, the parser the console and the client use.
 */
export async function runTextSoFar(base: string, token: string, runId: string): Promise<string> {
  const abort = new AbortController();
  const res = await fetch(new URL(`/v1/runs/${runId}/events`, base), {
    headers: { Authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  const first: { text?: string } = {};
  const parser = createParser({
    onEvent: (e) => {
      if (first.text === undefined && e.event === "delta") first.text = JSON.parse(e.data).text;
    },
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "";
      parser.feed(value);
      if (first.text !== undefined) return first.text;
    }
  } finally {
    abort.abort();
  }
}

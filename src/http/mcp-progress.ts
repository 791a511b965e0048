/**
 * MCP progress while a tool waits server-side (`sessions_send` with a wait). Streamable HTTP answers a
 * request as an SSE stream when notifications precede the response; the endpoint (src/http/mcp.ts) asks
 * the SDK transport for that stream only when the client sent a progressToken in `params._meta` and
 * accepts `text/event-stream` — otherwise the answer stays one JSON body and nothing is sent here.
 */
export const MCP_PROGRESS = {
  /** Interval of progress notifications while the wait lasts. */
  intervalMs: 5_000,
};

export type ProgressToken = string | number;

type ProgressNotification = {
  method: "notifications/progress";
  params: { progressToken: ProgressToken; progress: number; message: string };
};

/** The progress token of a tools/call that asked for progress (`params._meta.progressToken`), else undefined. */
export function progressTokenOf(params: unknown): ProgressToken | undefined {
  const meta = (params as { _meta?: { progressToken?: unknown } } | null | undefined)?._meta;
  const token = typeof meta === "object" && meta !== null ? meta.progressToken : undefined;
  return typeof token === "string" || typeof token === "number" ? token : undefined;
}

/**
 * Run `work`, sending a `notifications/progress` every interval until it settles. Bounded: at most
 * waitSeconds / interval + 1 notifications (the wait itself is capped, src/http/mcp-tools.ts), and a
 * notification that cannot be sent (the client went away) stops the rest.
 */
export async function withProgress<T>(
  opts: {
    token: ProgressToken;
    waitSeconds: number;
    what: string;
    notify: (n: ProgressNotification) => Promise<void>;
  },
  work: Promise<T>,
): Promise<T> {
  const started = Date.now();
  const limit = Math.ceil((opts.waitSeconds * 1000) / MCP_PROGRESS.intervalMs) + 1;
  let sent = 0;
  const timer = setInterval(() => {
    if (++sent > limit) return clearInterval(timer);
    const elapsed = Math.min(opts.waitSeconds, Math.round((Date.now() - started) / 1000));
    opts
      .notify({
        method: "notifications/progress",
        params: {
          progressToken: opts.token,
          progress: sent,
          message: `${opts.what}: still waiting (${elapsed} s of at most ${opts.waitSeconds} s)`,
        },
      })
      .catch(() => clearInterval(timer));
  }, MCP_PROGRESS.intervalMs);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

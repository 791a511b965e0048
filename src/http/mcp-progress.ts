import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { log } from "../log";

/**
 * MCP progress while `sessions_send` waits (Streamable HTTP: a request may be answered with an SSE
 * stream that carries notifications before the response). Only when the client sent a progressToken
 * in `params._meta` and accepts `text/event-stream`; otherwise the answer stays one JSON body.
 */
export const MCP_PROGRESS = {
  /** Interval of progress notifications while the wait lasts. */
  intervalMs: 5_000,
};

export type ProgressToken = string | number;

/**
 * The progress token and wait of a tools/call that will wait and asked for progress; null otherwise.
 * `waitOf`: the call's wait in seconds as the endpoint will apply it (capped), undefined for a tool that never waits.
 */
export function progressOf(
  params: Record<string, unknown>,
  accept: string | undefined,
  waitOf: (toolName: string, args: unknown) => number | undefined,
): { token: ProgressToken; waitSeconds: number } | null {
  if (!accept?.includes("text/event-stream")) return null;
  const token = (params._meta as { progressToken?: unknown } | undefined)?.progressToken;
  if (typeof token !== "string" && typeof token !== "number") return null;
  const waitSeconds = typeof params.name === "string" ? waitOf(params.name, params.arguments) : undefined;
  // No wait (0, or a tool that answers at once): nothing to report progress on.
  return waitSeconds !== undefined && waitSeconds > 0 ? { token, waitSeconds } : null;
}

/**
 * Answer one JSON-RPC request as an SSE stream (Hono's `streamSSE`): a `notifications/progress` every
 * interval while `work` runs (bounded: at most waitSeconds / interval + 1 of them), then the response,
 * then the end. A `work` that fails ends the stream without a response (logged).
 */
export function progressStream(
  c: Context,
  progress: { token: ProgressToken; waitSeconds: number },
  what: string,
  work: Promise<unknown>,
): Response {
  return streamSSE(c, async (stream) => {
    const started = Date.now();
    const message = (payload: unknown) => stream.writeSSE({ event: "message", data: JSON.stringify(payload) });
    let sent = 0;
    const limit = Math.ceil((progress.waitSeconds * 1000) / MCP_PROGRESS.intervalMs) + 1;
    const timer = setInterval(() => {
      if (++sent > limit) return clearInterval(timer);
      const elapsed = Math.min(progress.waitSeconds, Math.round((Date.now() - started) / 1000));
      void message({
        jsonrpc: "2.0",
        method: "notifications/progress",
        params: {
          progressToken: progress.token,
          progress: sent,
          message: `${what}: still waiting (${elapsed} s of at most ${progress.waitSeconds} s)`,
        },
      });
    }, MCP_PROGRESS.intervalMs);
    stream.onAbort(() => clearInterval(timer));
    try {
      await message(await work);
    } catch (err) {
      log.error("mcp_progress_failed", { tool: what, error: err });
    } finally {
      clearInterval(timer);
    }
  });
}

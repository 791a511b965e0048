import { backoffDelayMs } from "../backoff";
import { signedWebhookHeaders } from "./signed-webhook";

/**
 * Outbound channel webhook delivery (docs/webhooks.md).
 *
 * One POST per attempt; the durable outbox (elsewhere) decides when to call again using
 * `nextRetryDelayMs` and gives up after `MAX_DELIVERY_ATTEMPTS`. This module never throws:
 * every failure is classified as `retry` (worth trying again) or `dead` (will never succeed).
 */

export interface OutboundPayload {
  channel: string;
  to: string | null;
  accountId?: string | null;
  threadId?: string | null;
  message: string;
  sessionKey: string;
  kind: "reply" | "announce" | "subagent_announce" | "a2a_push";
  idempotencyKey: string;
}

export type DeliveryOutcome = "delivered" | "retry" | "dead";

export interface PostWebhookResult {
  outcome: DeliveryOutcome;
  status?: number;
  error?: string;
}

export const MAX_DELIVERY_ATTEMPTS = 8;
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 10_000;
const BASE_RETRY_DELAY_MS = 5_000;
const MAX_RETRY_DELAY_MS = 10 * 60_000;
const ERROR_BODY_CHARS = 200;
/** Bytes read from an error response at most: enough for 200 chars, bounded against huge pages. */
const ERROR_BODY_READ_BYTES = 4_096;

/**
 * Delay before the next attempt, where `attempt` is the number of attempts that have failed so far
 * (1 after the first failure): 5 s, 10 s, 20 s, 40 s … capped at 10 minutes. Deterministic (no
 * jitter) so the outbox's timers are predictable and testable; each session has its own outbox,
 * so there is no thundering herd to spread.
 */
export function nextRetryDelayMs(attempt: number): number {
  return backoffDelayMs({ baseDelayMs: BASE_RETRY_DELAY_MS, maxDelayMs: MAX_RETRY_DELAY_MS, jitter: "none" }, attempt);
}

/** 2xx delivered; 429 and 5xx are the receiver saying "later"; anything else will not improve. */
export function classifyHttpStatus(status: number): DeliveryOutcome {
  if (status >= 200 && status < 300) return "delivered";
  if (status === 429 || (status >= 500 && status < 600)) return "retry";
  return "dead";
}

/** Rejects when `signal` aborts, so a fetch implementation that ignores the signal still times out. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}

async function readSnippet(res: Response, signal: AbortSignal): Promise<string> {
  const body = res.body;
  if (!body) return "";
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let read = 0;
  try {
    while (read < ERROR_BODY_READ_BYTES) {
      const { done, value } = await raceAbort(reader.read(), signal);
      if (done) break;
      read += value.byteLength;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // A body we cannot read does not change the outcome; report what we have.
  } finally {
    reader.cancel().catch(() => {});
  }
  return text.replace(/\s+/g, " ").trim().slice(0, ERROR_BODY_CHARS);
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

/**
 * One delivery attempt, with the signed-webhook headers of src/channels/signed-webhook.ts keyed by the
 * payload's idempotency key (identical on every retry so receivers can de-duplicate). Redirects are not followed: a signed body should not
 * be forwarded to wherever a 3xx points, and a moved endpoint is a configuration error (`dead`).
 */
export async function postWebhook(input: {
  url: string;
  secret?: string;
  payload: OutboundPayload;
  /**
   * The body to send instead of the payload's JSON (an A2A push notification sends its `StreamResponse`:
   * src/a2a/push-delivery.ts), with its content type and headers of its own; the signature covers this body.
   */
  body?: { raw: string; contentType: string; headers: Record<string, string> };
  now?: () => number;
  fetchImpl?: typeof fetch;
  timeoutMs?: number;
}): Promise<PostWebhookResult> {
  const timeoutMs = input.timeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS;
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    return { outcome: "dead", error: "invalid webhook URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { outcome: "dead", error: `invalid webhook URL scheme: ${url.protocol}` };
  }

  let rawBody: string;
  let headers: Record<string, string>;
  try {
    rawBody = input.body?.raw ?? JSON.stringify(input.payload);
    headers = await signedWebhookHeaders({
      id: input.payload.idempotencyKey,
      rawBody,
      secret: input.secret,
      nowMs: (input.now ?? Date.now)(),
    });
    // The body's own headers never replace the signature and id headers they travel with.
    if (input.body) headers = { ...input.body.headers, ...headers, "Content-Type": input.body.contentType };
  } catch (err) {
    // Unserialisable payload or unusable secret: retrying cannot fix either.
    return { outcome: "dead", error: `cannot build request: ${errorMessage(err)}` };
  }

  // Bound `fetch` lazily: calling the global unbound through a variable throws "Illegal invocation" in workerd.
  const doFetch = input.fetchImpl ?? ((req: RequestInfo | URL, init?: RequestInit) => fetch(req, init));
  const signal = AbortSignal.timeout(timeoutMs);
  let res: Response;
  try {
    res = await raceAbort(
      Promise.resolve().then(() =>
        doFetch(url.toString(), { method: "POST", headers, body: rawBody, signal, redirect: "manual" }),
      ),
      signal,
    );
  } catch (err) {
    if (signal.aborted) return { outcome: "retry", error: `timeout after ${timeoutMs}ms` };
    return { outcome: "retry", error: `network error: ${errorMessage(err)}` };
  }

  const outcome = classifyHttpStatus(res.status);
  if (outcome === "delivered") {
    res.body?.cancel().catch(() => {}); // we do not need the body; release the connection
    return { outcome, status: res.status };
  }
  const snippet = await readSnippet(res, signal);
  return { outcome, status: res.status, error: snippet ? `HTTP ${res.status}: ${snippet}` : `HTTP ${res.status}` };
}

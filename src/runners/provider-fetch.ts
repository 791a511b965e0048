import { timeouts } from "../timeout-signal";

/**
 * The `fetch` of every AI SDK provider (src/runners/models.ts; docs/limits.md, "Outbound calls"). A model
 * provider is an outside server like a webhook, and gets the same bounds:
 *  - redirects are never followed: the request carries the provider's API key, which must not go where a
 *    3xx points; a 3xx fails the call;
 *  - one call (request and the whole response, streamed or not) takes at most `timeoutMs`, whatever the
 *    run's own deadline (a sub-agent run may have none);
 *  - at most `maxResponseBytes` of a response are read: past it the body fails, so a provider cannot make
 *    the object buffer without end.
 * An object, so a test can shrink a bound (test/runners/secrets-and-outbound.test.ts).
 */
export const PROVIDER_LIMITS = {
  timeoutMs: 15 * 60_000,
  maxResponseBytes: 32 * 1024 * 1024,
};

export const providerFetch: typeof fetch = async (input, init) => {
  const limit = timeouts.signal(PROVIDER_LIMITS.timeoutMs, init?.signal ?? undefined);
  const timedOut = () =>
    new Error(`model provider did not finish within ${Math.round(PROVIDER_LIMITS.timeoutMs / 1000)}s (docs/limits.md)`);
  let res: Response;
  try {
    res = await fetch(input, { ...init, redirect: "manual", signal: limit.signal });
  } catch (err) {
    limit.clear();
    throw isTimeout(limit.signal) ? timedOut() : err;
  }
  if (res.status >= 300 && res.status < 400) {
    limit.clear();
    void res.body?.cancel();
    throw new Error(`model provider answered HTTP ${res.status} (a redirect): redirects are not followed`);
  }
  if (!res.body) {
    limit.clear();
    return res;
  }
  const reader = res.body.getReader();
  let total = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) {
          limit.clear();
          controller.close();
          return;
        }
        total += value.byteLength;
        if (total > PROVIDER_LIMITS.maxResponseBytes) {
          limit.clear();
          void reader.cancel();
          controller.error(
            new Error(`model provider answered more than ${PROVIDER_LIMITS.maxResponseBytes} bytes (docs/limits.md)`),
          );
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        limit.clear();
        controller.error(isTimeout(limit.signal) ? timedOut() : err);
      }
    },
    cancel(reason) {
      limit.clear();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
};

function isTimeout(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof DOMException && signal.reason.name === "TimeoutError";
}

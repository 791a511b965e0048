/**
 * Time limits of outbound calls. `timeouts.signal(ms, parent)` is an AbortSignal that fires after `ms` (reason:
 * a `TimeoutError`, as AbortSignal.timeout gives), joined with `parent`, and the function that disarms it.
 * Unlike AbortSignal.timeout, the timer is cleared as soon as the call is done: a finished call leaves no
 * timer pending in the Durable Object that made it, and an object with a pending timer can neither hibernate
 * nor be evicted until it fires (test/session/run-lifecycle.test.ts). An object, so a test can shorten a limit
 * (test/runners/webhook-runtime.test.ts).
 */
export const timeouts = {
  signal(ms: number, parent?: AbortSignal): { signal: AbortSignal; clear: () => void } {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new DOMException("The operation timed out", "TimeoutError")), ms);
    return {
      signal: parent ? AbortSignal.any([parent, timeout.signal]) : timeout.signal,
      clear: () => clearTimeout(timer),
    };
  },
};

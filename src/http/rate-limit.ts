import { SwitchboardError } from "../errors";

/**
 * Failed-authentication limiter: after `limit` failures from one client within a minute, that client
 * gets 429 with Retry-After until the window passes. Kept per isolate: it slows guessing at the edge
 * where the guess arrives, and a success does not reset it (so valid and invalid guesses can't be interleaved).
 */
const WINDOW_MS = 60_000;
const MAX_TRACKED = 10_000;

export class AuthFailureLimiter {
  private failures = new Map<string, { count: number; since: number }>();

  assertAllowed(client: string, limit: number, now = Date.now()): void {
    const f = this.failures.get(client);
    if (!f) return;
    if (now - f.since >= WINDOW_MS) {
      this.failures.delete(client);
      return;
    }
    if (f.count >= limit) {
      const retryAfter = Math.max(1, Math.ceil((f.since + WINDOW_MS - now) / 1000));
      throw new SwitchboardError("rate_limited", `Too many failed authentication attempts; retry after ${retryAfter}s`, {
        headers: { "Retry-After": String(retryAfter) },
      });
    }
  }

  recordFailure(client: string, now = Date.now()): void {
    const f = this.failures.get(client);
    if (!f || now - f.since >= WINDOW_MS) {
      if (this.failures.size >= MAX_TRACKED) this.failures.delete(this.failures.keys().next().value!);
      this.failures.set(client, { count: 1, since: now });
    } else f.count++;
  }

  reset(): void {
    this.failures.clear();
  }
}

export const authLimiter = new AuthFailureLimiter();

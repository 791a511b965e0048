import { SwitchboardError } from "../errors";

/**
 * Failed-authentication limiting (docs/limits.md). Failures are counted per key — the presented credential's
 * digest and the client's address (src/http/auth-failure-keys.ts) — by the Workers Rate Limiting binding
 * `AUTH_FAILURES` (wrangler.jsonc `ratelimits`: 10 per key per 60 s), which counts across isolates of a
 * location; without that binding they are counted in this isolate against `limits.authFailuresPerMinute`.
 *
 * The binding can only count-and-check, never peek, so the failure that goes over the limit is answered
 * 429 and its key is remembered here as blocked for one period: until then a *failing* request with that
 * credential or from that address is 429 instead of 401. Only failing requests: a valid token is never
 * refused (src/http/auth.ts), because Worker-hosted bridges and runtimes share a few egress addresses and
 * anyone's failures would otherwise lock them all out. A success never resets a count.
 */
const WINDOW_MS = 60_000;
/** Clients remembered per isolate (blocked or, without the binding, counted); the oldest are dropped first. */
const MAX_TRACKED = 10_000;

function rateLimited(retryAfterSeconds: number): SwitchboardError {
  return new SwitchboardError(
    "rate_limited",
    `Too many failed authentication attempts; retry after ${retryAfterSeconds}s`,
    {
      headers: { "Retry-After": String(retryAfterSeconds) },
    },
  );
}

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= MAX_TRACKED) map.delete(map.keys().next().value!);
  map.set(key, value);
}

export class AuthFailureLimiter {
  private blockedUntil = new Map<string, number>();
  /** Only without the binding: failures in this isolate's current window per client. */
  private failures = new Map<string, { count: number; since: number }>();

  /** Throws 429 while `client` (a counter key) is blocked. */
  assertAllowed(client: string, now = Date.now()): void {
    const until = this.blockedUntil.get(client);
    if (until === undefined) return;
    if (now >= until) {
      this.blockedUntil.delete(client);
      return;
    }
    throw rateLimited(Math.max(1, Math.ceil((until - now) / 1000)));
  }

  /** Count one failure under each key (all of them are counted); 429 when any goes over, else return for the 401. */
  async recordFailures(
    keys: readonly string[],
    limiter: RateLimit | undefined,
    fallbackLimit: number,
    now = Date.now(),
  ): Promise<void> {
    const results = await Promise.allSettled(keys.map((k) => this.recordFailure(k, limiter, fallbackLimit, now)));
    const refused = results.find((r) => r.status === "rejected");
    if (refused) throw (refused as PromiseRejectedResult).reason;
  }

  /**
   * Count one failed authentication of `client`. Throws 429 (and blocks the client for a period) when
   * it goes over the limit; returns when the caller should answer its usual 401.
   */
  async recordFailure(
    client: string,
    limiter: RateLimit | undefined,
    fallbackLimit: number,
    now = Date.now(),
  ): Promise<void> {
    const over = limiter
      ? !(await limiter.limit({ key: client })).success
      : this.countInIsolate(client, fallbackLimit, now);
    if (!over) return;
    remember(this.blockedUntil, client, now + WINDOW_MS);
    throw rateLimited(WINDOW_MS / 1000);
  }

  private countInIsolate(client: string, limit: number, now: number): boolean {
    const f = this.failures.get(client);
    if (!f || now - f.since >= WINDOW_MS) {
      remember(this.failures, client, { count: 1, since: now });
      return 1 > limit;
    }
    f.count++;
    return f.count > limit;
  }

  reset(): void {
    this.blockedUntil.clear();
    this.failures.clear();
  }
}

export const authLimiter = new AuthFailureLimiter();

import { SwitchboardError } from "../errors";

/**
 * Failed-authentication limiting (docs/limits.md). Failures are counted by the Workers Rate Limiting
 * binding `AUTH_FAILURES` (wrangler.jsonc `ratelimits`: 10 per client per 60 s), which counts across
 * isolates of a location; without that binding they are counted in this isolate against
 * `limits.authFailuresPerMinute`.
 *
 * The binding can only count-and-check, never peek, so the failure that goes over the limit is
 * answered 429 and the client is remembered here as blocked for one period: until then every request
 * from it is 429 before its token is looked at, a valid one included — otherwise a guesser could tell
 * a right guess (200) from a wrong one (429). A success never resets the count.
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

  /** Throws 429 while `client` is blocked. */
  assertAllowed(client: string, now = Date.now()): void {
    const until = this.blockedUntil.get(client);
    if (until === undefined) return;
    if (now >= until) {
      this.blockedUntil.delete(client);
      return;
    }
    throw rateLimited(Math.max(1, Math.ceil((until - now) / 1000)));
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

/**
 * The one exponential backoff: the delay before the next attempt after `failures` failed ones is
 * `baseDelayMs × 2^(failures − 1)`, capped at `maxDelayMs`. With `jitter: "equal"` half of it is fixed
 * and half random, so retries that failed together (a requester down for many children) spread out;
 * `"none"` keeps it exact where each caller retries alone and tests pin the delays (the outbox).
 * Used by session timers (src/session/timer-policy.ts), channel deliveries (src/channels/webhook.ts)
 * and the registry's legacy move (src/registry/legacy-move.ts); test/session/dead-timers.test.ts and
 * test/channels/webhook.test.ts pin its values.
 */
export interface Backoff {
  baseDelayMs: number;
  maxDelayMs: number;
  jitter: "none" | "equal";
}

/** Past this many doublings every sane base is far beyond its cap; stops `2 ** n` from overflowing. */
const MAX_DOUBLINGS = 30;

/** `failures` below 1, fractional or NaN counts as 1 (the first retry); +Infinity as the cap. */
export function backoffDelayMs(b: Backoff, failures: number, random: () => number = Math.random): number {
  const n = Number.isFinite(failures) ? Math.max(1, Math.floor(failures)) : failures > 0 ? MAX_DOUBLINGS + 1 : 1;
  const exp = Math.min(b.maxDelayMs, b.baseDelayMs * 2 ** Math.min(n - 1, MAX_DOUBLINGS));
  return b.jitter === "equal" ? Math.round(exp / 2 + random() * (exp / 2)) : exp;
}

// The calls the sends part of the benchmark makes (bench/sends.mjs, bench/send-profile.mjs): sends with an
// idempotency key retried after a dropped connection, bare object calls, bursts with every call in flight at
// once, and waits for runs to end.
import { runPool, summarize } from "./load.mjs";

export const WAIT_DEADLINE_MS = 240_000;

const SEND_ATTEMPTS = 5;

/** A call inside a 1,000-wide burst waits behind up to 999 others on this 2-core machine. */
export const BURST_CALL_TIMEOUT_MS = 180_000;

export const SEND_TEXT = (n) => `bench-send #${String(n).padStart(4, "0")}`;

/**
 * A send with an idempotency key, retried (same key) when the local dev proxy drops the connection
 * under 1,000 concurrent requests (wrangler's proxy answers 503 "worker restarted mid-request").
 * That is what a careful client does, and the checks below prove it never yields a second run.
 */
export function sender(request, path, requesterKey, retries) {
  const once =
    path === "sessions_send"
      ? async (key, text, idempotencyKey) => {
          const res = await request(
            "POST",
            "/tools/invoke",
            {
              tool: "sessions_send",
              sessionKey: requesterKey,
              args: { sessionKey: key, message: text, timeoutSeconds: 0, idempotencyKey },
            },
            { timeoutMs: BURST_CALL_TIMEOUT_MS },
          );
          const d = res.json.result.details;
          if (d.status !== "accepted" || !d.runId)
            throw new Error(`sessions_send did not accept: ${JSON.stringify(d).slice(0, 300)}`);
          return d.runId;
        }
      : async (key, text, idempotencyKey) => {
          const res = await request(
            "POST",
            `/v1/sessions/${encodeURIComponent(key)}/messages`,
            { message: text, idempotencyKey },
            { timeoutMs: BURST_CALL_TIMEOUT_MS },
          );
          if (res.json.status !== "accepted" || !res.json.runId)
            throw new Error(`inbound message not accepted: ${res.text.slice(0, 300)}`);
          return res.json.runId;
        };
  return (key, text) => {
    const idempotencyKey = `bench:${key}:${text}`;
    return withRetry(() => once(key, text, idempotencyKey), retries);
  };
}

/** Retry a call that is safe to repeat (idempotency key, or no side effect) after a dropped connection. */
async function withRetry(fn, retries) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const transient = err.status === 503 || err.status === undefined;
      if (!transient || attempt >= SEND_ATTEMPTS) throw err;
      retries.count++;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

/** One burst: `count` calls all in flight at once; per-call latency plus client-side send/answer times. */
export async function burst(name, count, fn) {
  const sentAt = new Array(count);
  const answeredAt = new Array(count);
  const results = new Array(count);
  const t0 = performance.now();
  const lat = await runPool(count, count, async (i) => {
    sentAt[i] = performance.now();
    results[i] = await fn(i);
    answeredAt[i] = performance.now();
  });
  const wall = performance.now() - t0;
  return { stats: summarize(name, lat, wall, { wall }), sentAt, answeredAt, results, t0 };
}

/** Wait until every run has ended (server-side waits, re-called until a deadline). Returns final snapshots. */
export async function waitAll(request, runIds, concurrency) {
  const deadline = Date.now() + WAIT_DEADLINE_MS;
  const out = new Array(runIds.length);
  await runPool(runIds.length, concurrency, async (i) => {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`run ${runIds[i]} did not end within ${WAIT_DEADLINE_MS / 1000}s`);
      let res;
      try {
        res = await request(
          "GET",
          `/v1/runs/${encodeURIComponent(runIds[i])}/wait?timeoutMs=${Math.min(left, 20_000)}`,
          undefined,
          { timeoutMs: 45_000 },
        );
      } catch (err) {
        // A wait is safe to repeat: a dropped or parked connection just means "ask again".
        if (err.status === undefined || err.status === 503) continue;
        throw err;
      }
      if (!["queued", "running"].includes(res.json.status)) {
        out[i] = res.json;
        return;
      }
    }
  });
  return out;
}

/**
 * The bare call (bench/routes.ts), retried like a send after a dropped connection; `retries` counts them.
 * POST: a GET dropped by the dev proxy would be parked forever instead of failing.
 */
export function pinger(request, retries) {
  return (key) =>
    withRetry(
      () =>
        request("POST", `/v1/_bench/ping/${encodeURIComponent(key)}`, undefined, { timeoutMs: BURST_CALL_TIMEOUT_MS }),
      retries,
    );
}

/** Until the slow provider has answered `expected` model calls since it had answered `since` (bounded). */
export async function answersSince(provider, since, expected) {
  const deadline = Date.now() + WAIT_DEADLINE_MS;
  while (provider.stats.requests - since < expected && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 500));
}

export function sendRaw(request, requesterKey, key, text) {
  return request("POST", "/tools/invoke", {
    tool: "sessions_send",
    sessionKey: requesterKey,
    args: { sessionKey: key, message: text, timeoutSeconds: 0 },
  });
}

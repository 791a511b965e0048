// Load generation and statistics for the benchmark: fixed concurrency, fixed request counts,
// per-request timeouts, and scenarios measured round-robin so machine noise hits all alike.

export const REQUEST_TIMEOUT_MS = 60_000;

/** Minimal JSON client for the gateway; any non-2xx answer or an `ok: false` envelope is an error. */
export function client(base, token) {
  return async function request(method, path, body, { timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
    const res = await fetch(base + path, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    // Our error envelope always starts with {"ok":false; success bodies never do (checked cheaply, so
    // the client's own JSON parsing does not inflate the latency of large responses).
    if (!res.ok || text.startsWith('{"ok":false')) {
      const err = new Error(`${method} ${path} → ${res.status}: ${text.slice(0, 300)}`);
      err.status = res.status;
      throw err;
    }
    let parsed;
    return {
      status: res.status,
      text,
      bytes: Buffer.byteLength(text),
      serverTiming: res.headers.get("server-timing") ?? "",
      get json() {
        parsed ??= JSON.parse(text);
        return parsed;
      },
    };
  };
}

/** Run `fn(i)` for i in [0, count) with at most `concurrency` in flight; returns per-call latencies (ms). */
export async function runPool(count, concurrency, fn) {
  const latencies = new Array(count);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const t0 = performance.now();
      await fn(i);
      latencies[i] = performance.now() - t0;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return latencies;
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

export function summarize(name, latencies, elapsedMs, extra = {}) {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    name,
    requests: latencies.length,
    rps: latencies.length / (elapsedMs / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
    ...extra,
  };
}

/**
 * Measure scenarios side by side: `rounds` rounds, each running one batch of every scenario (the order
 * rotates per round), at a fixed concurrency. A scenario's requests/s is its requests over the time
 * spent in its own batches.
 * @param {{name: string, call: (i: number) => Promise<{bytes: number}>}[]} scenarios
 */
export async function measureInterleaved(scenarios, { warmup, requests, rounds, concurrency }) {
  const batch = Math.ceil(requests / rounds);
  const warmBatch = Math.ceil(warmup / rounds);
  const state = scenarios.map((s) => ({ s, latencies: [], elapsed: 0, bytes: 0, done: 0 }));
  for (let r = 0; r < rounds; r++) {
    for (const st of state) {
      await runPool(warmBatch, concurrency, (i) => st.s.call(r * warmBatch + i));
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < state.length; j++) {
      const st = state[(r + j) % state.length];
      const n = Math.min(batch, requests - st.done);
      if (n <= 0) continue;
      const t0 = performance.now();
      const lat = await runPool(n, concurrency, async (i) => {
        const res = await st.s.call(st.done + i);
        st.bytes = res.bytes;
      });
      st.elapsed += performance.now() - t0;
      st.latencies.push(...lat);
      st.done += n;
    }
  }
  return state.map((st) => summarize(st.s.name, st.latencies, st.elapsed, { bytes: st.bytes }));
}

export const fmt = (n, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");

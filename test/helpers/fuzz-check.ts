import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { expect } from "vitest";
import { authLimiter } from "../../src/http/rate-limit";
import worker from "../../src/index";
import type { FuzzRequest } from "./fuzz-values";

/**
 * The check of the generated bad-input suite (test/http/bad-input-properties.test.ts), run on every
 * generated request: 2xx, or 4xx with the error envelope (JSON-RPC's error object on /mcp) — never a 5xx;
 * a rejected request stored nothing (the session keys it named fresh have no storage and no registry shard
 * grew); an accepted spawn's timers are real times. Findings are recorded, not thrown, so one does not
 * hide the next; `report()` prints them with the counts per surface.
 */

interface Finding {
  surface: string;
  problem: string;
  request: string;
}
export const findings: Finding[] = [];
let tried = 0;
/** How many requests were checked so far. */
export const triedSoFar = () => tried;
export const bySurface = new Map<string, { n: number; statuses: Map<number, number> }>();

async function registryTotal(): Promise<number> {
  const [a, b] = await Promise.all([
    env.REGISTRY.getByName("registry:main").count(),
    env.REGISTRY.getByName("registry:research").count(),
  ]);
  return a + b;
}

function describeRequest(r: FuzzRequest): string {
  const body =
    r.body === undefined
      ? ""
      : ` ${r.body.length > 300 ? `${r.body.slice(0, 300)}… (${r.body.length} chars)` : r.body}`;
  return `${r.method} ${r.path.length > 200 ? `${r.path.slice(0, 200)}…` : r.path}${body}`;
}

export async function check(r: FuzzRequest): Promise<boolean> {
  tried++;
  if (tried % 200 === 0) authLimiter.reset();
  const before = await registryTotal();
  const metas = await Promise.all(r.fresh.map((k) => env.SESSIONS.getByName(k).getMeta()));
  const fresh = r.fresh.filter((_, i) => metas[i] === null);
  const headers: Record<string, string> = { Authorization: `Bearer ${r.token}`, ...(r.headers ?? {}) };
  if (r.body !== undefined && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
  const t0 = Date.now();
  const watchdog = setTimeout(() => console.log(`[fuzz] still waiting after 5 s: ${describeRequest(r)}`), 5000);
  // The Worker's fetch handler is called directly: the test runtime's SELF.fetch slows down with every
  // request it has served (a 100th request costs ~2 ms, a 400th ~50 ms), which would cap a run at a few hundred inputs.
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`https://switchboard.test${r.path}`, { method: r.method, headers, body: r.body }),
    env as Env,
    ctx,
  );
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  clearTimeout(watchdog);
  if (Date.now() - t0 > 2000) console.log(`[fuzz] slow (${Date.now() - t0} ms): ${describeRequest(r)}`);
  const s = bySurface.get(r.surface) ?? { n: 0, statuses: new Map() };
  s.n++;
  s.statuses.set(res.status, (s.statuses.get(res.status) ?? 0) + 1);
  bySurface.set(r.surface, s);
  // Recorded, not thrown: every generated request runs, so one finding does not hide the next.
  const found = (problem: string) => {
    findings.push({ surface: r.surface, problem, request: describeRequest(r) });
    return true;
  };
  if (res.status < 300 && r.surface.endsWith("sessions_spawn")) {
    // An accepted spawn: its child's run timeout and timers are real times, never Infinity or years away.
    const child = /"childSessionKey":"([^"]+)"/.exec(text)?.[1];
    if (child && text.includes('"status":"accepted"')) {
      const timeout = (await env.SESSIONS.getByName(child).getMeta())?.subagent?.runTimeoutSeconds ?? 0;
      if (!Number.isFinite(timeout) || timeout > 31 * 24 * 3600)
        return found(`accepted spawn with runTimeoutSeconds ${timeout}`);
      const dues = await runInDurableObject(env.SESSIONS.getByName(child), (_o, state) =>
        state.storage.sql.exec<{ kind: string; due_at: number }>("SELECT kind, due_at FROM timers").toArray(),
      );
      const far = dues.find((t) => !Number.isFinite(t.due_at) || t.due_at > Date.now() + 31 * 24 * 3600_000);
      if (far) return found(`accepted spawn with a ${far.kind} timer due at ${far.due_at}`);
    }
  }
  if (res.status >= 500 || res.status < 200 || (res.status >= 300 && res.status < 400))
    return found(`HTTP ${res.status}: ${text.slice(0, 300)}`);
  if (res.status >= 400) {
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      return found(`HTTP ${res.status} without a JSON body: ${text.slice(0, 200)}`);
    }
    const envelope =
      json?.ok === false && typeof json.error?.type === "string" && typeof json.error?.message === "string";
    const jsonRpc =
      r.path === "/mcp" &&
      json?.jsonrpc === "2.0" &&
      typeof json.error?.code === "number" &&
      typeof json.error?.message === "string";
    if (!envelope && !jsonRpc) return found(`HTTP ${res.status} without the error envelope: ${text.slice(0, 200)}`);
    const after = await registryTotal();
    if (after > before) return found(`rejected (HTTP ${res.status}) but the registry grew from ${before} to ${after}`);
    for (const k of fresh) {
      if ((await env.SESSIONS.getByName(k).getMeta()) !== null)
        return found(`rejected (HTTP ${res.status}) but session ${k} was created`);
    }
  }
  return true;
}

/** Runs `check` on `numRuns` requests of `arb`, generated from `seed`. */
export async function explore(
  name: string,
  arb: fc.Arbitrary<FuzzRequest>,
  numRuns: number,
  seed: number,
): Promise<void> {
  const details = await fc.check(fc.asyncProperty(arb, check), { seed, numRuns });
  // Only an exception inside the check itself (a broken client request) fails the property.
  if (details.failed)
    console.log(`[fuzz] ${name}: the check threw after ${details.numRuns} runs: ${String(details.errorInstance)}`);
  expect(details.failed).toBe(false);
}

/** One line of totals, one per surface with its statuses, and the first 20 findings. */
export function report(seed: number, ms: number): void {
  console.log(
    `[fuzz] seed ${seed}: ${tried} generated requests in ${(ms / 1000).toFixed(1)}s over ${bySurface.size} surfaces; ${findings.length} finding(s)`,
  );
  for (const [surface, s] of [...bySurface].sort())
    console.log(
      `[fuzz]   ${surface}: ${s.n} (${[...s.statuses]
        .sort((a, b) => a[0] - b[0])
        .map(([st, n]) => `${st}×${n}`)
        .join(" ")})`,
    );
  for (const f of findings.slice(0, 20)) console.log(`[fuzz] FOUND ${f.surface}: ${f.problem}\n        ${f.request}`);
}

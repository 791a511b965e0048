// Where a send's time goes (bench/sends.mjs reports it): the Server-Timing phases of sessions_send next to a
// bare object call's, and what each call costs the machine by source file (bench/cpu-profile.mjs).
import { profileCalls } from "./cpu-profile.mjs";
import { runPool } from "./load.mjs";
import { pinger, sendRaw, waitAll } from "./send-calls.mjs";

/** `name;dur=12.3, other;dur=4` → { name: 12.3, other: 4 } (the Server-Timing header app.ts adds). */
export function parseServerTiming(header) {
  const out = {};
  for (const part of header.split(",")) {
    const [name, ...params] = part.trim().split(";");
    const dur = params.map((p) => /^dur=([\d.]+)$/.exec(p.trim())).find(Boolean);
    if (name && dur) out[name] = Number(dur[1]);
  }
  return out;
}

/**
 * Where a send's time goes: the Server-Timing phases of sessions_send (auth, caller, resolve, requester,
 * enqueue, total) next to a bare object call's, p50 over 200 calls each at concurrency 8, plus the
 * client-side latency (what is not in "total" is the dev proxy and the network stack).
 */
export async function profilePhases(request, requesterKey, ping) {
  const N = 200;
  const scenarios = [
    { name: "bare object call", call: () => ping("agent:send:profile") },
    { name: "bare object call → a new object", call: (i) => ping(`agent:send:profile-bare-${i}`) },
    {
      name: "sessions_send → one session",
      call: (i) => sendRaw(request, requesterKey, "agent:send:profile", `profile #${i}`),
    },
    {
      name: "sessions_send → a new session",
      call: (i) => sendRaw(request, requesterKey, `agent:send:profile-${i}`, `profile #${i}`),
    },
  ];
  const rows = [];
  for (const s of scenarios) {
    const phases = {};
    const client = [];
    await runPool(N, 8, async (i) => {
      const t0 = performance.now();
      const res = await s.call(i);
      client.push(performance.now() - t0);
      for (const [k, v] of Object.entries(parseServerTiming(res.serverTiming))) {
        phases[k] ??= [];
        phases[k].push(v);
      }
    });
    const p50 = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    rows.push({
      name: s.name,
      client: p50(client),
      phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, p50(v)])),
    });
  }
  return rows;
}

/** Calls per profiled scenario, and how long the profile keeps running after the last answer (the runs' tail). */
const CPU = { calls: 200, concurrency: 8, tailMs: 3_000 };

/**
 * What a call costs the machine, by source file (bench/cpu-profile.mjs): each scenario's calls at concurrency 8,
 * then a quiet tail so the runs the sends started (reply and announce step) end inside the profile. The runs
 * are checked to have ended afterwards, outside the profile. Taken first, on a fresh gateway: connecting the
 * profiler after the bench's heavy parts failed here (wrangler's proxy process ran out of its 20,000 file
 * descriptors, or refused the connection). A profile that cannot be taken is reported, never fatal.
 */
export async function profileSendCpu({ request, inspectorPort, moduleOf, requesterKey = "agent:send:main" }) {
  const ping = pinger(request, { count: 0 });
  await runPool(40, 8, (i) => ping(`agent:send:cpu-warm-${i}`));
  await runPool(40, 8, (i) => sendRaw(request, requesterKey, `agent:send:cpu-warm-${i}`, `warm-up ${i}`));
  try {
    return { scenarios: await profileScenarios(request, requesterKey, ping, { inspectorPort, moduleOf }) };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

async function profileScenarios(request, requesterKey, ping, { inspectorPort, moduleOf }) {
  const scenarios = [
    { name: "bare call → a new object each", call: (i) => ping(`agent:send:cpu-bare-${i}`) },
    {
      name: "sessions_send → a new session each",
      call: (i) => sendRaw(request, requesterKey, `agent:send:cpu-new-${i}`, `cpu #${i}`),
    },
    { name: "bare call → one object", call: () => ping("agent:send:cpu-one") },
    {
      name: "sessions_send → one session",
      call: (i) => sendRaw(request, requesterKey, "agent:send:cpu-one", `cpu #${i}`),
    },
  ];
  const out = [];
  for (const s of scenarios) {
    const runIds = [];
    const res = await profileCalls({
      inspectorPort,
      moduleOf,
      calls: CPU.calls,
      fn: async () => {
        await runPool(CPU.calls, CPU.concurrency, async (i) => {
          const r = await s.call(i);
          const runId = r.json?.result?.details?.runId;
          if (runId) runIds.push(runId);
        });
        await new Promise((resolve) => setTimeout(resolve, CPU.tailMs));
      },
    });
    const ended = runIds.length ? (await waitAll(request, runIds, 8)).filter((r) => r.status === "ok").length : null;
    out.push({ name: s.name, runs: runIds.length, ended, ...res });
  }
  return out;
}

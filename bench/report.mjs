// The tables of bench/out/results.md (bench/run.mjs writes the file): the read scenarios with their ratios
// against the bar, and the send bursts with their goals, phases and CPU profile.
import { fmt } from "./load.mjs";

/** The most a read at 100,000 sessions may cost over its small or bare counterpart (p50). */
const BAR = 1.25;

export function readTable(rows) {
  const by = Object.fromEntries(rows.map((r) => [r.name, r]));
  const lines = [
    "| scenario | requests | requests/s | p50 ms | p99 ms | response bytes |",
    "|---|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) => `| ${r.name} | ${r.requests} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.bytes} |`,
    ),
  ];
  const ratio = (a, b) => {
    const p50 = by[a].p50 / by[b].p50;
    const p99 = by[a].p99 / by[b].p99;
    const rps = by[b].rps / by[a].rps;
    return { p50, p99, rps, pass: p50 <= BAR };
  };
  const pairs = [
    ["list@100k / list@100", "sessions_list @100k", "sessions_list @100"],
    ["history@100k / history@100", "sessions_history @100k", "sessions_history @100"],
    ["list@100k / bare", "sessions_list @100k", "bare route"],
    ["history@100k / bare", "sessions_history @100k", "bare route"],
    ["list@100k tree / list@100", "sessions_list @100k, tree (sandboxed)", "sessions_list @100"],
    ["list@100k / bare 60 KB", "sessions_list @100k", "bare route, 60 KB response"],
    ["history@100k / bare 60 KB", "sessions_history @100k", "bare route, 60 KB response"],
    ["list@100k limit 1 / bare", "sessions_list @100k, limit 1", "bare route"],
    ["history@100k limit 1 / bare", "sessions_history @100k, limit 1", "bare route"],
  ];
  const ratios = pairs.map(([label, a, b]) => ({ label, ...ratio(a, b) }));
  lines.push(
    "",
    `| ratio | p50 | p99 | time per request (1/rps) | bar ≤ ${BAR}× (p50) |`,
    "|---|---:|---:|---:|---|",
    ...ratios.map(
      (r) =>
        `| ${r.label} | ${fmt(r.p50, 2)}× | ${fmt(r.p99, 2)}× | ${fmt(r.rps, 2)}× | ${r.pass ? "met" : `missed by ${fmt((r.p50 / BAR - 1) * 100, 0)}%`} |`,
    ),
  );
  return { lines, ratios };
}

export function sendTable(res, cpuProfile) {
  const lines = [
    `Send path: ${res.path === "sessions_send" ? "`sessions_send` tool, `timeoutSeconds: 0` (fire-and-forget)" : "`POST /v1/sessions/{key}/messages` (sessions_send is not registered yet; same run queue)"}; all ${res.count} calls of a burst in flight at once.`,
    "",
    "| burst | calls | accepted/s | p50 ms | p99 ms | retried | all runs ended after | runs/s | runs ok |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...res.rows.map(
      (r) =>
        `| ${r.name} | ${r.requests} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${r.retried ?? "–"} | ${r.allRanMs ? `${fmt(r.allRanMs / 1000, 2)} s` : "–"} | ${r.runsPerSec ? fmt(r.runsPerSec, 0) : "–"} | ${r.ended ?? "–"} |`,
    ),
    "",
    `"accepted/s" counts calls answered per second of the burst; "runs/s" counts runs ended per second from the burst's start. ` +
      `Sends carry an idempotency key and are retried with it when the local dev proxy drops a connection under 1,000 concurrent requests. ` +
      `The one-session queue held ${res.rows[1].followUps} follow-up runs (announce steps) besides the sends; it was idle again ${fmt(res.rows[1].drainedMs / 1000, 2)} s after the burst began.`,
    "",
    "Steady state (concurrency 8, 400 calls each after 40 warm-up, interleaved in 10 rounds):",
    "",
    "| call | requests/s | p50 ms | p99 ms |",
    "|---|---:|---:|---:|",
    ...res.steady.map((r) => `| ${r.name} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} |`),
    "",
    `Per-send overhead over a bare object call of the same shape at concurrency 8 (p50): ${fmt(res.steady[1].p50 - res.steady[0].p50, 2)} ms into one session (bare: the same object), ${fmt(res.steady[2].p50 - res.steady[3].p50, 2)} ms into a new session (bare: a new object each; ${fmt(res.steady[2].p50 - res.steady[0].p50, 2)} ms over a call into an existing object).`,
    "",
    ...sendGoals(res),
    "",
    "Where a send's time goes (Server-Timing phases, p50 ms over 200 calls at concurrency 8; `client` is the caller's own latency):",
    "",
    ...phaseTable(res.profile),
    "",
    ...cpuTable(cpuProfile),
    `In the 1,000-wide bursts: one session ${fmt(res.overhead.oneSession.perSendMs, 2)} ms/send of wall time (${fmt(res.overhead.oneSession.meanMs, 1)} ms mean latency); ` +
      `1,000 sessions ${fmt(res.overhead.spread.perSendMs, 2)} ms/send (${fmt(res.overhead.spread.meanMs, 1)} ms mean latency).`,
    "",
    `Fan-in check (${res.count} sends into one session): ${res.check.ok ? "PASS" : "FAIL"} — ${res.check.checked} runs checked in queue order; ` +
      `${res.check.distinct} distinct numbered messages in the transcript, ${res.check.lost} lost, ${res.check.twice} twice, ${res.check.outOfOrder} out of order; ` +
      `every message followed by its reply${res.check.problems.length ? `; problems: ${res.check.problems.join("; ")}` : ""}; ` +
      (res.check.constrained > 0
        ? `no send answered before another was sent was queued after it (${res.check.constrained} such pairs).`
        : "all sends were in flight together, so acceptance (queue) order is the only order there is."),
    `Spread check (${res.count} sessions): ${res.spreadBad === 0 ? "PASS" : "FAIL"} — ${res.count - res.spreadBad} of ${res.count} runs ended ok with their echo reply.`,
  ];
  return lines;
}

/** Concurrency 8 and the 1,000-session burst with a model that answers like a remote one (bench/slow-provider.mjs). */
function slowModelRows(slow) {
  if (!slow) return [];
  const ok = slow.ratio >= 0.5;
  const c8 = slow.steady.send.p50 / slow.steady.bare.p50;
  return [
    `| a send at concurrency 8 ≤ 2× a bare call (p50), new session, model answering after ${slow.delayMs / 1000} s (${slow.steady.answeredDuring} model answers arrived while measured) | ${fmt(c8, 2)}× (${fmt(slow.steady.send.p50, 1)} vs ${fmt(slow.steady.bare.p50, 1)} ms) | ${c8 <= 2 ? "meets" : "misses"} |`,
    `| as worded: per-send overhead ≤ 2× a bare call, new session, model answering after ${slow.delayMs / 1000} s | ${fmt(c8 - 1, 2)}× | ${c8 - 1 <= 2 ? "meets" : "misses"} |`,
    `| send burst ≥ 0.5× bare burst, 1,000 sessions, model answering after ${slow.delayMs / 1000} s (its runs wait on the network; ${slow.answeredDuring} model answers arrived during the burst; ${slow.sends.retried} retried; runs not ok: ${slow.bad}) | ${fmt(slow.ratio, 2)}× (${fmt(slow.sends.rps, 0)} vs ${fmt(slow.bare.rps, 0)} calls/s) | ${ok ? "meets" : "misses"} |`,
  ];
}

/** The issue's two send goals, as ratios with a verdict each. */
function sendGoals(res) {
  const burstRatio = (send, bare) => send.rps / bare.rps;
  const one = burstRatio(res.rows[1], res.rows[0]);
  const spread = burstRatio(res.rows[3], res.rows[2]);
  const c8one = res.steady[1].p50 / res.steady[0].p50;
  // Same shape: a send that creates its session next to a bare call that starts a new object each.
  const c8new = res.steady[2].p50 / res.steady[3].p50;
  const c8newVsExisting = res.steady[2].p50 / res.steady[0].p50;
  const v = (ok) => (ok ? "meets" : "misses");
  return [
    "| goal | measured | verdict |",
    "|---|---:|---|",
    `| send burst ≥ 0.5× bare burst, one session | ${fmt(one, 2)}× | ${v(one >= 0.5)} |`,
    `| send burst ≥ 0.5× bare burst, 1,000 sessions (bare: 1,000 new objects) | ${fmt(spread, 2)}× | ${v(spread >= 0.5)} |`,
    `| a send at concurrency 8 ≤ 2× a bare call (p50), one session | ${fmt(c8one, 2)}× | ${v(c8one <= 2)} |`,
    `| a send at concurrency 8 ≤ 2× a bare call (p50), new session (bare: a new object each) | ${fmt(c8new, 2)}× | ${v(c8new <= 2)} |`,
    // The issue states this goal as "per-send overhead ≤ 2× a bare call", overhead being what a send costs more
    // than the bare call; the two rows above hold the send itself to 2×, the stricter reading.
    `| as worded: per-send overhead (send − bare, p50) ≤ 2× a bare call, one session | ${fmt(c8one - 1, 2)}× | ${v(c8one - 1 <= 2)} |`,
    `| as worded: per-send overhead (send − bare, p50) ≤ 2× a bare call, new session | ${fmt(c8new - 1, 2)}× | ${v(c8new - 1 <= 2)} |`,
    `| (old comparison, not the goal's shape) new session vs a bare call into an existing object | ${fmt(c8newVsExisting, 2)}× | – |`,
    ...slowModelRows(res.slowModel),
  ];
}

function phaseTable(profile) {
  if (!profile?.length) return ["(not measured)"];
  const names = [...new Set(profile.flatMap((r) => Object.keys(r.phases)))];
  return [
    `| call | client | ${names.join(" | ")} |`,
    `|---|---:|${names.map(() => "---:").join("|")}|`,
    ...profile.map((r) => `| ${r.name} | ${fmt(r.client, 1)} | ${names.map((n) => fmt(r.phases[n], 1)).join(" | ")} |`),
  ];
}

/** CPU per call by scenario, then the new-session send's CPU by source file (bench/cpu-profile.mjs). */
function cpuTable(profile) {
  if (!profile) return ["(CPU profile not taken)"];
  if (profile.error) return [`(CPU profile not taken: ${profile.error})`];
  const cpu = profile.scenarios;
  const newSend = cpu.find((r) => r.name.includes("new session"));
  const top = newSend.modules.slice(0, 14);
  return [
    "What a call costs the machine (V8 CPU profile of the gateway process, 200 calls at concurrency 8 and a 3 s tail so the runs they start end inside it; busy CPU ms per call):",
    "",
    "| call | busy CPU ms per call | runs started | ended ok |",
    "|---|---:|---:|---:|",
    ...cpu.map((r) => `| ${r.name} | ${fmt(r.busyMsPerCall, 2)} | ${r.runs || "–"} | ${r.ended ?? "–"} |`),
    "",
    `A send into a new session, CPU ms per send by the source file nearest the sample (its SQLite calls apart; ${fmt(newSend.busyMsPerCall, 2)} ms in all):`,
    "",
    "| source file | ms per send | of which SQLite |",
    "|---|---:|---:|",
    ...top.map((m) => `| ${m.module} | ${fmt(m.ms, 2)} | ${m.sqliteMs > 0 ? fmt(m.sqliteMs, 2) : "–"} |`),
  ];
}

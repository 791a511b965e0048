#!/usr/bin/env node
// `npm run bench`: start a local gateway (wrangler dev on 127.0.0.1:8799, fresh state under
// bench/out/state), seed 100 and 100,000 sessions and a 100- and a 100,000-message transcript, then
// measure sessions_list, sessions_history and a bare route side by side (interleaved), plus the
// sessions_send bursts. Prints the tables and writes them to bench/out/results.md.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { moduleLines } from "./cpu-profile.mjs";
import { benchEvents } from "./events.mjs";
import { buildSnapshot, startGateway, stopAllGateways } from "./gateway.mjs";
import { benchIndex, INDEX_AGENTS, seedIndex } from "./index.mjs";
import { client, fmt, measureInterleaved } from "./load.mjs";
import { benchSearch, SEARCH_AGENTS, seedSearch } from "./search.mjs";
import { benchSends, profileSendCpu } from "./sends.mjs";
import { benchSizes, SIZE_AGENTS, seedSizes } from "./sizes.mjs";
import { startSlowProvider } from "./slow-provider.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const OUT = join(root, "bench", "out");
const PORT = Number(process.env.BENCH_PORT ?? 8799);
/** The gateway's inspector, for the CPU profile of the sends (bench/cpu-profile.mjs). */
const INSPECTOR_PORT = PORT + 1;
/** A remote model that answers after SLOW_MODEL.delayMs (bench/slow-provider.mjs), for the slow-model send burst. */
const SLOW_MODEL = { port: PORT + 2, delayMs: 15_000, agentId: "slow" };
/** The operator token: random, as strong as src/config/secrets.ts requires of any deployment. */
const TOKEN = randomBytes(32).toString("base64url");
/**
 * The whole run is bounded: a hung gateway or request ends the bench with an error, never a hang. The full
 * bench takes ~7 min on a quiet 2-core VM and about twice that under load (sends: the bursts, the CPU profile,
 * the slow model's 15 s answers and announce steps), so the bound leaves room.
 */
const BENCH_DEADLINE_MS = 30 * 60_000;

const SIZES = { small: 100, big: 100_000 };
/** A sandboxed agent sees only its own tree: 100,000 sessions of which every 1,000th is a child of its main session. */
const TREE = { agentId: "tree", total: 100_000, childEvery: 1_000 };
const TRANSCRIPTS = { "agent:hist:t100": 100, "agent:hist:t100k": 100_000 };
const LOAD = { concurrency: 8, requests: 2_000, warmup: 200, rounds: 20 };
const BAR = 1.25;

// Agents `small` and `big` hold 100 and 100,000 sessions; `hist` the two transcripts; `send` the
// send bursts. Visibility "agent" lets a requester see every row of its agent. Ping-pong is off so a
// send costs exactly its primary run (plus the announce step), which is what the check counts.
const CONFIG = {
  agents: {
    defaults: { model: "builtin/echo" },
    list: [
      { id: "main", default: true },
      { id: "small" },
      { id: "big" },
      { id: "hist" },
      { id: "send" },
      { id: "tree", sandbox: { mode: "all" } },
      { id: SIZE_AGENTS.max },
      { id: SIZE_AGENTS.ordinary },
      { id: INDEX_AGENTS.one },
      { id: INDEX_AGENTS.many },
      { id: SEARCH_AGENTS.small },
      { id: SEARCH_AGENTS.big },
      { id: SLOW_MODEL.agentId, model: "slow/bench" },
    ],
  },
  models: {
    providers: {
      slow: { api: "openai-completions", baseUrl: `http://127.0.0.1:${SLOW_MODEL.port}/v1`, models: [{ id: "bench" }] },
    },
  },
  tools: { sessions: { visibility: "agent" } },
  session: { agentToAgent: { maxPingPongTurns: 0 } },
};

const log = (...a) => console.log(...a);
let gateway = null;
let stopping = false;

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  await stopAllGateways().catch(() => {});
  process.exit(code);
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => void shutdown(130));
process.on("uncaughtException", (err) => {
  console.error(err);
  void shutdown(1);
});
setTimeout(() => {
  console.error(`bench exceeded ${BENCH_DEADLINE_MS / 60_000} minutes; stopping`);
  void shutdown(1);
}, BENCH_DEADLINE_MS).unref();

async function seed(request) {
  for (const [agentId, total] of Object.entries(SIZES)) {
    const t0 = performance.now();
    for (let from = 0; from < total; from += 5_000) {
      await request("POST", "/v1/_bench/seed/sessions", { agentId, from, count: Math.min(5_000, total - from) });
    }
    log(`  seeded ${total} sessions of agent "${agentId}" in ${fmt((performance.now() - t0) / 1000)} s`);
  }
  {
    const t0 = performance.now();
    for (let from = 0; from < TREE.total; from += 5_000) {
      await request("POST", "/v1/_bench/seed/sessions", {
        agentId: TREE.agentId,
        from,
        count: Math.min(5_000, TREE.total - from),
        childrenOf: `agent:${TREE.agentId}:main`,
        childEvery: TREE.childEvery,
      });
    }
    log(
      `  seeded ${TREE.total} sessions of agent "${TREE.agentId}" (${TREE.total / TREE.childEvery} spawned by its main session) in ${fmt((performance.now() - t0) / 1000)} s`,
    );
  }
  for (const [sessionKey, total] of Object.entries(TRANSCRIPTS)) {
    const t0 = performance.now();
    for (let done = 0; done < total; done += 20_000) {
      await request("POST", "/v1/_bench/seed/transcript", { sessionKey, count: Math.min(20_000, total - done) });
    }
    log(`  seeded ${total} messages into ${sessionKey} in ${fmt((performance.now() - t0) / 1000)} s`);
  }
}

const listCall =
  (request, agentId, args = {}) =>
  () =>
    request("POST", "/tools/invoke", { tool: "sessions_list", sessionKey: `agent:${agentId}:main`, args });
const historyCall =
  (request, key, args = {}) =>
  () =>
    request("POST", "/tools/invoke", {
      tool: "sessions_history",
      sessionKey: "agent:hist:main",
      args: { sessionKey: key, ...args },
    });

/** Every scenario must answer what a user would expect before it is timed (same page sizes on both sides). */
async function sanityCheck(request) {
  for (const [agentId, total] of Object.entries(SIZES)) {
    const d = (await listCall(request, agentId)()).json.result.details;
    if (d.count !== 50 || !d.nextCursor)
      throw new Error(
        `sessions_list of ${agentId} (${total} sessions): expected a full page of 50 and a cursor, got ${d.count}`,
      );
  }
  const tree = (await listCall(request, TREE.agentId)()).json.result.details;
  if (
    tree.count !== 50 ||
    !tree.nextCursor ||
    tree.visibility !== "tree" ||
    tree.sessions.some((r) => r.spawnedBy !== `agent:${TREE.agentId}:main`)
  ) {
    throw new Error(
      `sessions_list of the sandboxed agent: expected 50 of its children and a cursor, got ${tree.count} (${tree.visibility})`,
    );
  }
  // Every child is reachable through the cursor, once each, newest first.
  const children = [];
  for (let cursor, page = 0; page < 10; page++) {
    const d = (await listCall(request, TREE.agentId, { limit: 40, ...(cursor ? { cursor } : {}) })()).json.result
      .details;
    children.push(...d.sessions);
    cursor = d.nextCursor;
    if (!cursor) break;
  }
  const expected = TREE.total / TREE.childEvery;
  const ordered = children.every((r, i) => i === 0 || r.updatedAt <= children[i - 1].updatedAt);
  if (new Set(children.map((r) => r.key)).size !== expected || children.length !== expected || !ordered) {
    throw new Error(
      `paging the sandboxed agent's tree: expected ${expected} distinct children newest first, got ${children.length}`,
    );
  }
  for (const [key, total] of Object.entries(TRANSCRIPTS)) {
    const d = (await historyCall(request, key)()).json.result.details;
    if (d.messages.length !== 50 || !d.hasMore)
      throw new Error(`sessions_history of ${key} (${total}): expected 50 messages and more, got ${d.messages.length}`);
    const newest = d.messages.at(-1).__switchboard?.seq;
    if (newest !== undefined && newest !== total)
      throw new Error(`sessions_history of ${key}: newest seq ${newest}, expected ${total}`);
  }
}

function readTable(rows) {
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

function sendTable(res, cpuProfile) {
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

async function main() {
  mkdirSync(OUT, { recursive: true });
  const started = performance.now();
  log(
    `Starting gateway on 127.0.0.1:${PORT} (a build snapshot in bench/out/build, fresh state in bench/out/state, log in bench/out/wrangler.log)…`,
  );
  const script = await buildSnapshot(join(OUT, "build"), join(OUT, "build.log"));
  gateway = await startGateway({
    script,
    port: PORT,
    persistTo: join(OUT, "state"),
    logFile: join(OUT, "wrangler.log"),
    envFile: join(OUT, "bench.env"),
    vars: { GATEWAY_TOKEN: TOKEN, CONFIG: JSON.stringify(CONFIG) },
    inspectorPort: INSPECTOR_PORT,
  });
  log(`  ready after ${fmt((performance.now() - started) / 1000)} s; agents: ${gateway.agents.join(", ")}`);
  const request = client(gateway.base, TOKEN);

  // BENCH_ONLY=reads|sends|sizes|index|events|search runs one part (for development); the full bench runs all of them.
  const only = process.env.BENCH_ONLY;
  let cpuProfile = null;
  if (only === undefined || only === "sends") {
    log("Profiling what a send costs the machine (CPU profile, first: on a fresh gateway)…");
    cpuProfile = await profileSendCpu({ request, inspectorPort: INSPECTOR_PORT, moduleOf: moduleLines(script) });
    log(cpuProfile.error ? `  not taken: ${cpuProfile.error}` : "  profiled");
  }
  log("Seeding…");
  if (only === undefined || only === "index") await seedIndex(request, log);
  if (only === undefined || only === "search") await seedSearch(request, log);
  if (only !== "sizes" && only !== "index" && only !== "events" && only !== "search") {
    await seed(request);
    await sanityCheck(request);
  }
  if (only === undefined || only === "sizes") await seedSizes(request, log);

  let read = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "reads") {
    log(
      `Measuring read paths: ${LOAD.requests} requests per scenario after ${LOAD.warmup} warm-up, concurrency ${LOAD.concurrency}, ${LOAD.rounds} interleaved rounds…`,
    );
    const scenarios = [
      {
        name: "bare route",
        call: (
          (k) => () =>
            request("GET", `/v1/_bench/ping/${encodeURIComponent(k)}`)
        )("agent:hist:ping"),
      },
      { name: "sessions_list @100", call: listCall(request, "small") },
      { name: "sessions_list @100k", call: listCall(request, "big") },
      { name: "sessions_history @100", call: historyCall(request, "agent:hist:t100") },
      { name: "sessions_history @100k", call: historyCall(request, "agent:hist:t100k") },
      { name: "sessions_list @100k, tree (sandboxed)", call: listCall(request, TREE.agentId) },
      // The bare route again, carrying a filler as large as a 50-row list page through the object and the response.
      {
        name: "bare route, 60 KB response",
        call: () => request("GET", `/v1/_bench/ping/${encodeURIComponent("agent:hist:ping")}?pad=60000`),
      },
      // The same queries with a page of one: what is left when the payload is as small as the bare route's.
      { name: "sessions_list @100k, limit 1", call: listCall(request, "big", { limit: 1 }) },
      { name: "sessions_history @100k, limit 1", call: historyCall(request, "agent:hist:t100k", { limit: 1 }) },
    ];
    const rows = await measureInterleaved(scenarios, LOAD);
    read = readTable(rows);
    log("", read.lines.join("\n"), "");
  }

  let sizes = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "sizes") {
    sizes = await benchSizes(request, log);
    log("", sizes.lines.join("\n"), "");
  }

  let index = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "index") {
    index = await benchIndex(request, log);
    log("", index.lines.join("\n"), "");
  }

  let search = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "search") {
    search = await benchSearch(request, log);
    log("", search.lines.join("\n"), "");
  }

  let events = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "events") {
    log("Measuring event streams…");
    events = await benchEvents({ request, base: gateway.base, token: TOKEN, log });
    log("", events.lines.join("\n"), "");
  }

  let sends = null;
  let sendLines = [`(skipped: BENCH_ONLY=${only})`];
  if (only === undefined || only === "sends") {
    log("Measuring sends…");
    const provider = await startSlowProvider({ port: SLOW_MODEL.port, delayMs: SLOW_MODEL.delayMs });
    sends = await benchSends({
      request,
      base: gateway.base,
      token: TOKEN,
      count: Number(process.env.BENCH_SENDS ?? 1_000),
      log,
      slow: { agentId: SLOW_MODEL.agentId, provider, delayMs: SLOW_MODEL.delayMs },
    });
    await provider.stop();
    sendLines = sendTable(sends, cpuProfile);
    log("", sendLines.join("\n"), "");
  }

  const total = (performance.now() - started) / 1000;
  const md = [
    "# Switchboard benchmark",
    "",
    `${new Date().toISOString()} · local \`wrangler dev\` (workerd, local SQLite Durable Objects) on ${process.platform}/${process.arch}, Node ${process.version}, ${(await import("node:os")).cpus().length} CPUs · total ${fmt(total, 0)} s`,
    "",
    `## Read paths (concurrency ${LOAD.concurrency}, ${LOAD.requests} requests per scenario after ${LOAD.warmup} warm-up, interleaved in ${LOAD.rounds} rounds)`,
    "",
    "Lists return a full page of 50 rows and history pages 50 messages (default limits), so both sides of the @100k/@100 ratios return the same amount of data; the `limit 1` rows repeat the @100k queries with a one-item page, to separate the query from the payload.",
    "",
    ...read.lines,
    "",
    "## Byte budgets (maximum-size messages beside ordinary ones)",
    "",
    ...sizes.lines,
    "",
    "## Session index: 1 shard vs 16 (docs/scale.md)",
    "",
    ...index.lines,
    "",
    "## sessions_search at 100 and 100,000 sessions (docs/search.md)",
    "",
    ...search.lines,
    "",
    "## Event streams (docs/events.md)",
    "",
    ...events.lines,
    "",
    "## Sends (1,000 fire-and-forget sends)",
    "",
    ...sendLines,
    "",
  ].join("\n");
  writeFileSync(join(OUT, "results.md"), md);
  log(`Wrote bench/out/results.md (total ${fmt(total, 0)} s).`);
  const failed = sends !== null && (!sends.check.ok || sends.spreadBad > 0);
  await shutdown(failed ? 1 : 0);
}

main().catch((err) => {
  console.error("bench failed:", err?.stack ?? err);
  void shutdown(1);
});

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

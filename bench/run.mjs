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
import { benchSelfSizing, SPLIT_AGENTS, seedSelfSizing } from "./index-split.mjs";
import { benchLane } from "./lane.mjs";
import { client, fmt, measureInterleaved } from "./load.mjs";
import { readTable, sendTable } from "./report.mjs";
import { benchSearch, SEARCH_AGENTS, seedSearch } from "./search.mjs";
import { profileSendCpu } from "./send-profile.mjs";
import { benchSends } from "./sends.mjs";
import { benchSizes, SIZE_AGENTS, seedSizes } from "./sizes.mjs";
import { startSlowProvider } from "./slow-provider.mjs";
import { benchTasks } from "./tasks.mjs";

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

// Agents `small` and `big` hold 100 and 100,000 sessions; `hist` the two transcripts; `send` the
// send bursts. Visibility "agent" lets a requester see every row of its agent. Ping-pong is off so a
// send costs exactly its primary run (plus the announce step), which is what the check counts.
const CONFIG = {
  agents: {
    // Depth 3: the task ledger's cancel runs through a 3-level tree (bench/tasks.mjs).
    defaults: { model: "builtin/echo", subagents: { maxSpawnDepth: 3 } },
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
      ...Object.values(SPLIT_AGENTS).map((id) => ({ id })),
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
  // The bench's write loads run for minutes: only its own split (bench/index-split.mjs) changes a layout.
  session: { agentToAgent: { maxPingPongTurns: 0 }, indexSplit: { sustainSeconds: 3600 } },
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

  // BENCH_ONLY=reads|sends|sizes|index|self-sizing|events|lane|tasks|search runs one part (for development); the full bench runs all of them.
  const only = process.env.BENCH_ONLY;
  let cpuProfile = null;
  if (only === undefined || only === "sends") {
    log("Profiling what a send costs the machine (CPU profile, first: on a fresh gateway)…");
    cpuProfile = await profileSendCpu({ request, inspectorPort: INSPECTOR_PORT, moduleOf: moduleLines(script) });
    log(cpuProfile.error ? `  not taken: ${cpuProfile.error}` : "  profiled");
  }
  log("Seeding…");
  if (only === undefined || only === "index") await seedIndex(request, log);
  // BENCH_ONLY=self-sizing runs the self-sizing index's part alone (it is also part of BENCH_ONLY=index).
  const selfSizingOn = only === undefined || only === "index" || only === "self-sizing";
  if (selfSizingOn) await seedSelfSizing(request, log);
  if (only === undefined || only === "search") await seedSearch(request, log);
  if (
    only !== "sizes" &&
    only !== "index" &&
    only !== "self-sizing" &&
    only !== "events" &&
    only !== "lane" &&
    only !== "tasks" &&
    only !== "search"
  ) {
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
  let selfSizing = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (selfSizingOn) {
    selfSizing = await benchSelfSizing(request, log);
    log("", selfSizing.lines.join("\n"), "");
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

  let lane = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "lane") {
    lane = await benchLane(request, log);
    log("", lane.lines.join("\n"), "");
  }

  let tasks = { lines: [`(skipped: BENCH_ONLY=${only})`] };
  if (only === undefined || only === "tasks") {
    log("Measuring the task ledger (subagents wait, a cascading cancel)…");
    // Before the sends: the slow model's port is the tree's, answered by bench/tasks.mjs's own provider meanwhile.
    tasks = await benchTasks({ request, log, provider: { port: SLOW_MODEL.port, model: "slow/bench" } });
    log("", tasks.lines.join("\n"), "");
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
    "## The self-sizing session index (docs/scale.md)",
    "",
    ...selfSizing.lines,
    "",
    "## sessions_search at 100 and 100,000 sessions (docs/search.md)",
    "",
    ...search.lines,
    "",
    "## Event streams (docs/events.md)",
    "",
    ...events.lines,
    "",
    "## Sub-agent lane: spawn admission with 1 and 50 agents (docs/subagent-lane.md)",
    "",
    ...lane.lines,
    "",
    "## Task ledger (docs/tasks.md)",
    "",
    ...tasks.lines,
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

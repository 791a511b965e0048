// sessions_search (docs/search.md): the same searches over an agent with 100 sessions and one with
// 100,000, side by side, as ratios. The index is seeded directly (bench/search-routes.ts): every session
// has a question and an answer of ~30 words; "kumquat" is in 20 sessions whatever the total (a rare
// query: same hits on both sides), "report" in every session (a common query: 100 vs 100,000 matches).
import { fmt, measureInterleaved } from "./load.mjs";

export const SEARCH_AGENTS = { small: "srch100", big: "srch100k" };
const SIZES = { small: 100, big: 100_000 };
const BATCH = 5_000;
const LOAD = { concurrency: 8, requests: 1_000, warmup: 100, rounds: 10 };
const BAR = 1.5;

export async function seedSearch(request, log) {
  for (const side of Object.keys(SIZES)) {
    const t0 = performance.now();
    let indexed = 0;
    for (let from = 0; from < SIZES[side]; from += BATCH) {
      const body = { agentId: SEARCH_AGENTS[side], from, count: Math.min(BATCH, SIZES[side] - from) };
      // Seeding is idempotent (a message is indexed once): a batch the local dev proxy dropped is sent again.
      const r = await request("POST", "/v1/_bench/search/seed", body).catch((err) => {
        if (err.status !== 503) throw err;
        return request("POST", "/v1/_bench/search/seed", body);
      });
      indexed += r.json.indexed;
    }
    log(
      `  indexed ${SIZES[side]} sessions (${indexed} messages) of agent "${SEARCH_AGENTS[side]}" in ${fmt((performance.now() - t0) / 1000)} s`,
    );
  }
}

const searchCall = (request, side, query) => () =>
  request("POST", "/tools/invoke", {
    tool: "sessions_search",
    sessionKey: `agent:${SEARCH_AGENTS[side]}:main`,
    args: { query },
  });

/** Both sides must answer what a user expects before anything is timed. */
async function sanityCheck(request) {
  for (const side of Object.keys(SIZES)) {
    const rare = (await searchCall(request, side, "kumquat")()).json.result.details;
    if (rare.results.length !== 10 || !rare.truncated || !rare.results.every((r) => r.snippet.includes("kumquat")))
      throw new Error(
        `sessions_search "kumquat" @${SIZES[side]}: expected 10 of its 20 hits, got ${rare.results.length}`,
      );
    const common = (await searchCall(request, side, "report")()).json.result.details;
    if (common.results.length !== 10) throw new Error(`sessions_search "report" @${SIZES[side]}: expected 10 hits`);
    if (side === "big" && !common.warning) throw new Error(`sessions_search "report" @100k: expected the cap warning`);
  }
}

export async function benchSearch(request, log) {
  await sanityCheck(request);
  log(
    `Measuring sessions_search: ${LOAD.requests} requests per scenario after ${LOAD.warmup} warm-up, concurrency ${LOAD.concurrency}, ${LOAD.rounds} interleaved rounds…`,
  );
  const scenarios = [
    {
      name: "bare route",
      call: () => request("GET", `/v1/_bench/ping/${encodeURIComponent("agent:main:search-ping")}`),
    },
    { name: "search rare word @100", call: searchCall(request, "small", "kumquat") },
    { name: "search rare word @100k", call: searchCall(request, "big", "kumquat") },
    { name: "search two words @100", call: searchCall(request, "small", "kumquat report") },
    { name: "search two words @100k", call: searchCall(request, "big", "kumquat report") },
    { name: "search common word @100", call: searchCall(request, "small", "report") },
    { name: "search common word @100k (capped)", call: searchCall(request, "big", "report") },
  ];
  const rows = await measureInterleaved(scenarios, LOAD);
  const by = Object.fromEntries(rows.map((r) => [r.name, r]));
  const pairs = [
    ["rare @100k / @100", "search rare word @100k", "search rare word @100"],
    ["two words @100k / @100", "search two words @100k", "search two words @100"],
    ["common @100k / @100", "search common word @100k (capped)", "search common word @100"],
    ["rare @100k / bare", "search rare word @100k", "bare route"],
  ];
  const lines = [
    "| scenario | requests | requests/s | p50 ms | p99 ms | response bytes |",
    "|---|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) => `| ${r.name} | ${r.requests} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.bytes} |`,
    ),
    "",
    `| ratio | p50 | p99 | time per request (1/rps) | goal ≤ ${BAR}× (p50, @100k / @100 rows) |`,
    "|---|---:|---:|---:|---|",
    ...pairs.map(([label, a, b]) => {
      const p50 = by[a].p50 / by[b].p50;
      const goal = label.includes("bare") ? "–" : p50 <= BAR ? "met" : `missed by ${fmt((p50 / BAR - 1) * 100, 0)}%`;
      return `| ${label} | ${fmt(p50, 2)}× | ${fmt(by[a].p99 / by[b].p99, 2)}× | ${fmt(by[b].rps / by[a].rps, 2)}× | ${goal} |`;
    }),
  ];
  return { lines };
}

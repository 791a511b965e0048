// The self-sizing session index (docs/scale.md, "The self-sizing index"): a sessions_list page of an agent
// that fits one object (100 and 100,000 sessions) and of a 100,000-session agent split to 4 shards, next to
// the bare route, all interleaved in one run; and an agent's row-write throughput while its index splits,
// against the same writes before and after.
import { fmt, measureInterleaved, runPool } from "./load.mjs";

export const SPLIT_AGENTS = { small: "ixs100", big: "ixs100k", split: "ixsplit" };
const SESSIONS = { small: 100, big: 100_000, split: 100_000 };
/** The split agent ends at this many shards (two doublings). */
const SPLIT_TO = 4;
const LIST_LOAD = { concurrency: 8, requests: 1_000, warmup: 100, rounds: 10 };
/** Each write request: 250 row writes, 16 in flight inside the Worker; 4 requests in flight. */
const WRITES = { perRequest: 250, inside: 16, requests: 4, concurrency: 4 };
const GOALS = { oneObjectVsBare: 0.9, splitVsOneObject: 1.5 };

export async function seedSelfSizing(request, log) {
  for (const [side, agentId] of Object.entries(SPLIT_AGENTS)) {
    const t0 = performance.now();
    for (let from = 0; from < SESSIONS[side]; from += 5_000)
      await request("POST", "/v1/_bench/seed/sessions", {
        agentId,
        from,
        count: Math.min(5_000, SESSIONS[side] - from),
      });
    log(
      `  seeded ${SESSIONS[side]} sessions of self-sizing agent "${agentId}" in ${fmt((performance.now() - t0) / 1000)} s`,
    );
  }
}

const layoutOf = async (request, agentId) =>
  (await request("GET", `/v1/_bench/index/layout?agentId=${agentId}`)).json.layout;

/** One round of writes into the split agent; returns rows written and ms. */
async function writeRound(request) {
  const t0 = performance.now();
  await runPool(WRITES.requests, WRITES.concurrency, () =>
    request("POST", "/v1/_bench/index/writes", {
      agentId: SPLIT_AGENTS.split,
      from: 0,
      sessions: SESSIONS.split,
      count: WRITES.perRequest,
      concurrency: WRITES.inside,
    }),
  );
  return { rows: WRITES.requests * WRITES.perRequest, ms: performance.now() - t0 };
}

/** Writes before, during and after one doubling of the split agent (1 → 2); then doublings up to SPLIT_TO. */
async function splitUnderWrites(request, log) {
  const phases = { before: { rows: 0, ms: 0 }, during: { rows: 0, ms: 0 }, after: { rows: 0, ms: 0 } };
  const add = (p, r) => {
    phases[p].rows += r.rows;
    phases[p].ms += r.ms;
  };
  for (let i = 0; i < 3; i++) add("before", await writeRound(request));
  const t0 = performance.now();
  await request("POST", "/v1/_bench/index/split", { agentId: SPLIT_AGENTS.split });
  let rounds = 0;
  // Bounded: a doubling of 100,000 rows is done in well under 100 rounds.
  for (; rounds < 100; rounds++) {
    const r = await writeRound(request);
    const l = await layoutOf(request, SPLIT_AGENTS.split);
    if (l.from === null) {
      // The move ended during this round: count it as during only if most of it ran while moving.
      if (rounds === 0) add("during", r);
      break;
    }
    add("during", r);
  }
  let l = await layoutOf(request, SPLIT_AGENTS.split);
  for (let i = 0; i < 600 && l.from !== null; i++) l = await layoutOf(request, SPLIT_AGENTS.split);
  const moveMs = performance.now() - t0;
  for (let i = 0; i < 3; i++) add("after", await writeRound(request));
  log(`  1 → 2 shards under writes: ${fmt(moveMs / 1000)} s, ${rounds + 1} write rounds while it moved`);
  while (l.shards < SPLIT_TO) {
    const t1 = performance.now();
    await request("POST", "/v1/_bench/index/split", { agentId: SPLIT_AGENTS.split });
    l = await layoutOf(request, SPLIT_AGENTS.split);
    for (let i = 0; i < 10_000 && l.from !== null; i++) l = await layoutOf(request, SPLIT_AGENTS.split);
    log(`  → ${l.shards} shards in ${fmt((performance.now() - t1) / 1000)} s`);
  }
  return { phases, moveMs };
}

export async function benchSelfSizing(request, log) {
  log("Self-sizing index: writes before, during and after a split…");
  const { phases, moveMs } = await splitUnderWrites(request, log);
  const list = (agentId) => () =>
    request("POST", "/tools/invoke", { tool: "sessions_list", sessionKey: `agent:${agentId}:main`, args: {} });
  log(`Self-sizing index: listing, ${LIST_LOAD.requests} requests per scenario, concurrency ${LIST_LOAD.concurrency}…`);
  const rows = await measureInterleaved(
    [
      { name: "bare route", call: () => request("GET", `/v1/_bench/ping/${encodeURIComponent("agent:hist:ping")}`) },
      { name: `sessions_list, ${SESSIONS.small} sessions (1 object)`, call: list(SPLIT_AGENTS.small) },
      { name: `sessions_list, ${SESSIONS.big} sessions (1 object)`, call: list(SPLIT_AGENTS.big) },
      { name: `sessions_list, ${SESSIONS.split} sessions split to ${SPLIT_TO} shards`, call: list(SPLIT_AGENTS.split) },
      // The bare route again, its response as large as a page of 50 rows: what the page's bytes cost alone.
      {
        name: "bare route, 52 KB response",
        call: () => request("GET", `/v1/_bench/ping/${encodeURIComponent("agent:hist:ping")}?pad=51500`),
      },
    ],
    LIST_LOAD,
  );
  const [bare, small, big, split, bareSized] = rows;
  const rate = (p) => phases[p].rows / (phases[p].ms / 1000);
  const vsBare = (r) => bare.p50 / r.p50;
  const splitRatio = split.p50 / big.p50;
  const lines = [
    "| scenario | requests/s | p50 ms | p99 ms | response bytes |",
    "|---|---:|---:|---:|---:|",
    ...rows.map((r) => `| ${r.name} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.bytes} |`),
    "",
    `One object against the bare route (bare p50 / list p50; goal ≥ ${GOALS.oneObjectVsBare}×): ${SESSIONS.small} sessions ${fmt(vsBare(small), 2)}×, ${SESSIONS.big} sessions ${fmt(vsBare(big), 2)}×.`,
    `Against the bare route with a response of a page's size: ${SESSIONS.small} sessions ${fmt(bareSized.p50 / small.p50, 2)}×, ${SESSIONS.big} sessions ${fmt(bareSized.p50 / big.p50, 2)}×.`,
    `Split to ${SPLIT_TO} shards / one object, ${SESSIONS.big} sessions (p50; goal ≤ ${GOALS.splitVsOneObject}×): ${fmt(splitRatio, 2)}× — ${splitRatio <= GOALS.splitVsOneObject ? "met" : "missed"}.`,
    "",
    "| row writes into the 100,000-session agent | rows | rows/s |",
    "|---|---:|---:|",
    ...["before", "during", "after"].map(
      (p) =>
        `| ${p === "before" ? "1 shard" : p === "during" ? "while splitting 1 → 2" : "2 shards, settled"} | ${phases[p].rows} | ${fmt(rate(p), 0)} |`,
    ),
    "",
    `Writes while splitting / before: ${fmt(rate("during") / rate("before"), 2)}×; after / before: ${fmt(rate("after") / rate("before"), 2)}×. The 1 → 2 move of ${SESSIONS.split / 2} rows took ${fmt(moveMs / 1000)} s under those writes.`,
  ];
  return { lines, oneObjectVsBare: vsBare(big), splitRatio };
}

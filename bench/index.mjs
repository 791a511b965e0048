// The sharded session index (docs/scale.md): row-write throughput into one shard versus N
// shards under the same generated load, and the cost of one listing page at 1 and N shards.
import { fmt, measureInterleaved, runPool } from "./load.mjs";

export const INDEX_AGENTS = { one: "idx1", many: "idx16" };
const SHARDS = { one: 1, many: 16 };
const SESSIONS = 20_000;
/** Writes: every request makes 500 row writes, 16 in flight inside the Worker; 4 requests in flight. */
const WRITES = { perRequest: 500, inside: 16, requests: 16, concurrency: 4, rounds: 3 };
const LIST_LOAD = { concurrency: 8, requests: 1_000, warmup: 100, rounds: 10 };
const BAR = 1.25;
/** Where a page's time goes: sequential calls inside the Worker, median of interleaved rounds. */
const PROFILE = { rounds: 10, reps: 40 };
/** Stored bytes: rows written into a fresh one-shard index; turns sent into one session. */
const BYTES = { rows: 5_000, agentId: "idxbytes", turns: 20, sessionKey: "agent:main:bench-bytes" };
/** A typical chat turn's text (~200 bytes, as bench/seed.ts's synthetic messages). */
const TURN_TEXT = "How are the numbers for this week looking? ".repeat(5);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Sequential page and empty-fan-out latency inside the Worker at 1 and N shards (bench/routes.ts, /index/profile). */
async function profileListing(request) {
  const out = {};
  for (let round = 0; round < PROFILE.rounds; round++) {
    for (const side of Object.keys(INDEX_AGENTS)) {
      for (const what of ["page", "empty", "noop"]) {
        const r = await request(
          "GET",
          `/v1/_bench/index/profile?agentId=${INDEX_AGENTS[side]}&shards=${SHARDS[side]}&what=${what}&reps=${PROFILE.reps}`,
        );
        const key = `${side}/${what}`;
        out[key] = [...(out[key] ?? []), r.json.msPerCall];
      }
    }
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, median(v)]));
}

/** Stored bytes per index row (row + its columns, indexes and sessionId locator) and per session object. */
async function measureBytes(request) {
  const idx = (await request("POST", "/v1/_bench/index/bytes", { agentId: BYTES.agentId, count: BYTES.rows })).json;
  const sessionBytes = async () =>
    (await request("GET", `/v1/_bench/session-bytes/${encodeURIComponent(BYTES.sessionKey)}`)).json.bytes;
  const turn = async (n) => {
    const sent = await request("POST", `/v1/sessions/${encodeURIComponent(BYTES.sessionKey)}/messages`, {
      message: `${n}: ${TURN_TEXT}`,
    });
    await request("GET", `/v1/runs/${encodeURIComponent(sent.json.runId)}/wait?timeoutMs=20000`);
  };
  await turn(0);
  const oneTurn = await sessionBytes();
  for (let n = 1; n < BYTES.turns; n++) await turn(n);
  const manyTurns = await sessionBytes();
  return {
    perIndexRow: (idx.bytesAfter - idx.bytesBefore) / idx.rows,
    emptyShard: idx.bytesBefore,
    sessionOneTurn: oneTurn,
    perTurn: (manyTurns - oneTurn) / (BYTES.turns - 1),
    sessionManyTurns: manyTurns,
  };
}

export async function seedIndex(request, log) {
  for (const [side, agentId] of Object.entries(INDEX_AGENTS)) {
    const t0 = performance.now();
    for (let from = 0; from < SESSIONS; from += 5_000) {
      await request("POST", "/v1/_bench/index/seed", {
        agentId,
        shards: SHARDS[side],
        from,
        count: Math.min(5_000, SESSIONS - from),
      });
    }
    log(
      `  seeded ${SESSIONS} index rows of agent "${agentId}" over ${SHARDS[side]} shard(s) in ${fmt((performance.now() - t0) / 1000)} s`,
    );
  }
}

export async function benchIndex(request, log) {
  const list = (side) => () =>
    request("GET", `/v1/_bench/index/list?agentId=${INDEX_AGENTS[side]}&shards=${SHARDS[side]}&limit=50`);
  for (const side of Object.keys(INDEX_AGENTS)) {
    const r = (await list(side)()).json;
    if (r.count !== 50 || !r.next)
      throw new Error(`index list of ${INDEX_AGENTS[side]}: expected a full page of 50 and a cursor, got ${r.count}`);
  }
  // Writes, interleaved by round: the same sessions and the same number of writes on both sides.
  const writes = { one: { writes: 0, ms: 0 }, many: { writes: 0, ms: 0 } };
  for (let round = 0; round < WRITES.rounds; round++) {
    for (const side of round % 2 ? ["many", "one"] : ["one", "many"]) {
      const t0 = performance.now();
      await runPool(WRITES.requests, WRITES.concurrency, (_i) =>
        request("POST", "/v1/_bench/index/writes", {
          agentId: INDEX_AGENTS[side],
          shards: SHARDS[side],
          from: 0,
          sessions: SESSIONS,
          count: WRITES.perRequest,
          concurrency: WRITES.inside,
        }).then((r) => {
          if (r.status !== 200) throw new Error(`index writes: ${r.status} ${JSON.stringify(r.json)}`);
          return r;
        }),
      );
      writes[side].ms += performance.now() - t0;
      writes[side].writes += WRITES.requests * WRITES.perRequest;
    }
  }
  const rate = (side) => writes[side].writes / (writes[side].ms / 1000);
  log(
    `Measuring index listing at 1 and ${SHARDS.many} shards: ${LIST_LOAD.requests} requests each, concurrency ${LIST_LOAD.concurrency}…`,
  );
  const rows = await measureInterleaved(
    [
      { name: `index page of 50, 1 shard`, call: list("one") },
      { name: `index page of 50, ${SHARDS.many} shards`, call: list("many") },
    ],
    LIST_LOAD,
  );
  const listRatio = rows[1].p50 / rows[0].p50;
  log("Profiling a page inside the Worker and measuring stored bytes…");
  const prof = await profileListing(request);
  const bytes = await measureBytes(request);
  const lines = [
    `${SESSIONS} rows per agent. Writes: ${WRITES.rounds} interleaved rounds of ${WRITES.requests} requests × ${WRITES.perRequest} row writes (${WRITES.inside} in flight per request, ${WRITES.concurrency} requests in flight), cycling over the same ${SESSIONS} sessions on both sides.`,
    "",
    "| index writes | writes | writes/s | writes/s per shard |",
    "|---|---:|---:|---:|",
    `| 1 shard | ${writes.one.writes} | ${fmt(rate("one"), 0)} | ${fmt(rate("one"), 0)} |`,
    `| ${SHARDS.many} shards | ${writes.many.writes} | ${fmt(rate("many"), 0)} | ${fmt(rate("many") / SHARDS.many, 0)} |`,
    "",
    `Write throughput ${SHARDS.many} shards / 1 shard: ${fmt(rate("many") / rate("one"), 2)}×.`,
    "",
    "| listing (index only, no tool layer) | requests/s | p50 ms | p99 ms | response bytes |",
    "|---|---:|---:|---:|---:|",
    ...rows.map((r) => `| ${r.name} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.bytes} |`),
    "",
    `Sharded page / unsharded page (p50): ${fmt(listRatio, 2)}× (p99 ${fmt(rows[1].p99 / rows[0].p99, 2)}×) — goal ≤ ${BAR}×: ${listRatio <= BAR ? "met" : `missed by ${fmt((listRatio / BAR - 1) * 100, 0)}%`}.`,
    "",
    `Inside the Worker, sequential (median of ${PROFILE.rounds} rounds × ${PROFILE.reps} calls):`,
    "",
    `| call | 1 shard ms | ${SHARDS.many} shards ms |`,
    "|---|---:|---:|",
    `| one page of 50 | ${fmt(prof["one/page"], 2)} | ${fmt(prof["many/page"], 2)} |`,
    `| the fan-out alone (an indexed lookup that finds nothing, every shard) | ${fmt(prof["one/empty"], 2)} | ${fmt(prof["many/empty"], 2)} |`,
    `| the calls alone (every shard asked its database size: no SQL) | ${fmt(prof["one/noop"], 2)} | ${fmt(prof["many/noop"], 2)} |`,
    "",
    `Stored bytes (SQLite databaseSize): ${fmt(bytes.perIndexRow, 0)} B per index row (row, columns, 5 indexes, sessionId locator; ${BYTES.rows} rows into an empty shard of ${bytes.emptyShard} B); ` +
      `a session object with one turn ${bytes.sessionOneTurn} B, +${fmt(bytes.perTurn, 0)} B per turn (${BYTES.turns} turns: ${bytes.sessionManyTurns} B).`,
  ];
  return { lines, writeRatio: rate("many") / rate("one"), listRatio, prof, bytes };
}

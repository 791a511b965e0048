// The byte-budget rows (docs/limits.md): sessions_history and sessions_list message previews
// over sessions of maximum-size (512 KiB) messages, side by side with the same reads over ordinary
// (~200-byte) messages. The goal: a maximum-size session reads within 1.5× of an ordinary one.
import { fmt, measureInterleaved } from "./load.mjs";

export const SIZE_AGENTS = { max: "sizemax", ordinary: "sizeord" };
const MAX_MESSAGE_BYTES = 512 * 1024;
/**
 * Sessions per agent and messages per session: 5 × 60 × 512 KiB = 150 MiB of maximum-size transcript;
 * ordinary sessions hold 250, enough for a history page of the same 80 KB (limit 200).
 */
const SESSIONS = 5;
const MESSAGES = { max: 60, ordinary: 250 };
/** Messages per seeding request: 40 × 512 KiB stays under the seed route's 32 MiB per request. */
const SEED_BATCH = 40;
const BAR = 1.5;
const LOAD = { concurrency: 8, requests: 600, warmup: 60, rounds: 10 };

const sessionKey = (agentId, s) => `agent:${agentId}:size-${s}`;

export async function seedSizes(request, log) {
  for (const [label, agentId] of Object.entries(SIZE_AGENTS)) {
    const t0 = performance.now();
    for (let s = 0; s < SESSIONS; s++) {
      for (let done = 0; done < MESSAGES[label]; done += SEED_BATCH) {
        const count = Math.min(SEED_BATCH, MESSAGES[label] - done);
        await request("POST", "/v1/_bench/seed/transcript", {
          sessionKey: sessionKey(agentId, s),
          count,
          ...(label === "max" ? { textBytes: MAX_MESSAGE_BYTES } : {}),
        });
      }
    }
    log(
      `  seeded ${SESSIONS} sessions × ${MESSAGES[label]} ${label} messages (agent "${agentId}") in ${fmt((performance.now() - t0) / 1000)} s`,
    );
  }
}

export async function benchSizes(request, log) {
  const history = (agentId, limit) => () =>
    request("POST", "/tools/invoke", {
      tool: "sessions_history",
      sessionKey: `agent:${agentId}:main`,
      args: { sessionKey: sessionKey(agentId, 0), ...(limit ? { limit } : {}) },
    });
  const list = (agentId) => () =>
    request("POST", "/tools/invoke", {
      tool: "sessions_list",
      sessionKey: `agent:${agentId}:main`,
      args: { messageLimit: 20 },
    });
  // Both sides must answer what a user expects before they are timed.
  for (const agentId of Object.values(SIZE_AGENTS)) {
    const h = (await history(agentId)()).json.result.details;
    if (h.messages.length === 0 || h.bytes > 80 * 1024)
      throw new Error(`sessions_history of ${agentId}: ${h.messages.length} messages, ${h.bytes} bytes`);
    const l = (await list(agentId)()).json.result.details;
    if (l.count < SESSIONS || l.sessions.some((r) => r.key.includes(":size-") && !(r.messages?.length > 0)))
      throw new Error(`sessions_list of ${agentId}: previews missing`);
  }
  log(
    `Measuring byte budgets: ${LOAD.requests} requests per scenario after ${LOAD.warmup} warm-up, concurrency ${LOAD.concurrency}, ${LOAD.rounds} interleaved rounds…`,
  );
  const scenarios = [
    { name: "history, ordinary messages", call: history(SIZE_AGENTS.ordinary) },
    { name: "history, 512 KiB messages", call: history(SIZE_AGENTS.max) },
    // The same 80 KB page of ordinary messages: what a page of that many bytes costs anyway.
    { name: "history, ordinary messages, limit 200", call: history(SIZE_AGENTS.ordinary, 200) },
    { name: "list previews (20 per row), ordinary messages", call: list(SIZE_AGENTS.ordinary) },
    { name: "list previews (20 per row), 512 KiB messages", call: list(SIZE_AGENTS.max) },
  ];
  const rows = await measureInterleaved(scenarios, LOAD);
  const by = Object.fromEntries(rows.map((r) => [r.name, r]));
  const ratio = (a, b) => by[a].p50 / by[b].p50;
  const pairs = [
    ["history: 512 KiB / ordinary", scenarios[1].name, scenarios[0].name],
    ["history: 512 KiB / ordinary, same page bytes", scenarios[1].name, scenarios[2].name],
    ["list previews: 512 KiB / ordinary", scenarios[4].name, scenarios[3].name],
  ].map(([label, a, b]) => ({ label, p50: ratio(a, b), p99: by[a].p99 / by[b].p99 }));
  const lines = [
    `${SESSIONS} sessions per agent (${MESSAGES.max} maximum-size or ${MESSAGES.ordinary} ordinary messages each); history reads one session (default limit 50: an 80 KB page of 512 KiB messages, a 20 KB page of ordinary ones — the \`limit 200\` row is an ordinary page of the same 80 KB), the list reads all ${SESSIONS} rows with \`messageLimit: 20\`.`,
    "",
    "| scenario | requests | requests/s | p50 ms | p99 ms | response bytes |",
    "|---|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) => `| ${r.name} | ${r.requests} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.bytes} |`,
    ),
    "",
    `| ratio | p50 | p99 | goal ≤ ${BAR}× (p50) |`,
    "|---|---:|---:|---|",
    ...pairs.map(
      (p) =>
        `| ${p.label} | ${fmt(p.p50, 2)}× | ${fmt(p.p99, 2)}× | ${p.p50 <= BAR ? "met" : `missed by ${fmt((p.p50 / BAR - 1) * 100, 0)}%`} |`,
    ),
  ];
  return { lines, pairs };
}

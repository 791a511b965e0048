// Spawn admission through the sub-agent lanes (docs/subagent-lane.md, docs/scale.md): the lane's own cost per
// spawn (one acquire and one release, straight to the lane objects: bench/lane-routes.ts) with 1 agent and with
// 50 agents spawning at once, without and with a gateway-wide maxConcurrent (the slot bank). Interleaved rounds,
// so a slow moment of the machine hits every scenario alike.
import { fmt, percentile } from "./load.mjs";

const ROUNDS = 6;
const SCENARIOS = [
  { name: "1 agent, maxConcurrent unset", agents: 1, spawns: 40, gatewayMax: null },
  { name: "50 agents at once, maxConcurrent unset", agents: 50, spawns: 8, gatewayMax: null },
  { name: "1 agent, maxConcurrent 1,000 (bank)", agents: 1, spawns: 40, gatewayMax: 1_000 },
  { name: "50 agents at once, maxConcurrent 1,000 (bank)", agents: 50, spawns: 8, gatewayMax: 1_000 },
];

export async function benchLane(request, log) {
  log(`Measuring spawn admission through the lanes: ${ROUNDS} interleaved rounds…`);
  const samples = SCENARIOS.map(() => ({ perSpawn: [], spawns: 0, wallMs: 0 }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, s] of SCENARIOS.entries()) {
      const r = await request("POST", "/v1/_bench/lane", {
        agents: s.agents,
        spawns: s.spawns,
        gatewayMax: s.gatewayMax,
        tag: `r${round}s${i}`,
      });
      if (r.status !== 200) throw new Error(`lane bench ${s.name}: ${r.status} ${JSON.stringify(r.json)}`);
      samples[i].perSpawn.push(...r.json.perSpawnMs);
      samples[i].spawns += r.json.spawns;
      samples[i].wallMs += r.json.wallMs;
    }
  }
  const rows = SCENARIOS.map((s, i) => {
    const sorted = [...samples[i].perSpawn].sort((a, b) => a - b);
    return {
      name: s.name,
      spawns: samples[i].spawns,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      perSecond: samples[i].spawns / (samples[i].wallMs / 1000),
    };
  });
  const perSpawn = (i) => 1000 / rows[i].perSecond;
  const lines = [
    "| scenario | spawns | wall time ÷ spawns (ms) | spawns admitted per second | one spawn's latency p50 / p95 (ms) |",
    "|---|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.spawns} | ${fmt(1000 / r.perSecond, 2)} | ${fmt(r.perSecond, 0)} | ${fmt(r.p50, 1)} / ${fmt(r.p95, 1)} |`,
    ),
    "",
    `Wall time ÷ spawns, 50 agents ÷ 1 agent: ${fmt(perSpawn(1) / perSpawn(0), 2)}× without a bank, ${fmt(perSpawn(3) / perSpawn(2), 2)}× with it (goal: flat in the number of agents). ` +
      "A spawn is one acquire and one release. Locally every object runs in one workerd process, so 50 agents at once queue for the same CPU and one spawn's latency grows with the number in flight (the last column); what must stay flat is the lane's cost per spawn (wall time ÷ spawns; with one agent its spawns run one after another, so that is their latency). On Cloudflare each agent's lane is its own object and runs in parallel.",
  ];
  return { rows, lines };
}

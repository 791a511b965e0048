// The task ledger (docs/tasks.md): what `subagents wait` costs next to a bare call, and how long a
// `subagents cancel` of a 3-level tree takes until every descendant is terminal.
import { createServer } from "node:http";
import { fmt, measureInterleaved } from "./load.mjs";

const enc = encodeURIComponent;
const LOAD = { concurrency: 8, requests: 600, warmup: 60, rounds: 10 };
/** The tree below the cancelled child: 4 children, each with 4 children (20 descendants, 3 levels with it). */
const FANOUT = 4;
const POLL_MS = 10;

/** A model provider that never answers until it is stopped: the tree's tasks run until they are cancelled. */
async function hangingProvider(port) {
  const server = createServer(() => {});
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  return {
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

async function invoke(request, sessionKey, tool, args) {
  const r = await request("POST", "/tools/invoke", { tool, args, sessionKey });
  return r.json.result.details;
}

async function tasksOf(request, key) {
  return (await request("GET", `/v1/sessions/${enc(key)}/tasks?limit=100`)).json.tasks;
}

async function until(what, check, timeoutMs = 60_000) {
  const t0 = performance.now();
  for (;;) {
    if (await check()) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`${what}: not reached after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Spawn one child of `owner` on `model`; its task id from the owner's ledger. */
async function spawn(request, owner, task, model) {
  const d = await invoke(request, owner, "sessions_spawn", { task, ...(model ? { model } : {}) });
  if (d.status !== "accepted") throw new Error(`spawn from ${owner}: ${JSON.stringify(d)}`);
  const t = (await tasksOf(request, owner)).find((x) => x.childSessionKey === d.childSessionKey);
  return { key: d.childSessionKey, runId: d.runId, taskId: t.taskId };
}

export async function benchTasks({ request, log, provider }) {
  const hanging = await hangingProvider(provider.port);
  try {
    // 1. The wait's overhead: one ended task, waited on (it answers at once, `completed`) and read as a snapshot.
    const requester = `agent:main:bench-tasks-${Date.now()}`;
    const done = await spawn(request, requester, "echo this");
    await until("the echo child's task ends", async () =>
      (await tasksOf(request, requester)).every((t) => t.status === "succeeded"),
    );
    log(`  measuring subagents wait: ${LOAD.requests} requests per scenario, concurrency ${LOAD.concurrency}…`);
    const rows = await measureInterleaved(
      [
        { name: "bare route", call: () => request("GET", `/v1/_bench/ping/${enc(requester)}`) },
        {
          name: "subagents wait (1 ended task)",
          call: () =>
            request("POST", "/tools/invoke", {
              tool: "subagents",
              args: { action: "wait", taskIds: [done.taskId] },
              sessionKey: requester,
            }),
        },
        {
          name: "subagents wait, timeoutSeconds 0 (1 ended task)",
          call: () =>
            request("POST", "/tools/invoke", {
              tool: "subagents",
              args: { action: "wait", taskIds: [done.taskId], timeoutSeconds: 0 },
              sessionKey: requester,
            }),
        },
        {
          name: "subagents list (1 task)",
          call: () => request("POST", "/tools/invoke", { tool: "subagents", args: {}, sessionKey: requester }),
        },
      ],
      LOAD,
    );

    // 2. The cascade: T below the requester, 4 children of T, 4 children of each (20 descendants), all running
    // or queued for the lane on a model that never answers; one cancel of T.
    log("  building a 3-level tree of 20 children…");
    const root = `agent:main:bench-tree-${Date.now()}`;
    const top = await spawn(request, root, "top of the tree", provider.model);
    const mids = [];
    for (let i = 0; i < FANOUT; i++) mids.push(await spawn(request, top.key, `branch ${i}`, provider.model));
    const leaves = [];
    for (const m of mids)
      for (let i = 0; i < FANOUT; i++) leaves.push(await spawn(request, m.key, `leaf of ${m.key}`, provider.model));
    const owners = [root, top.key, ...mids.map((m) => m.key)];
    const everyone = [top, ...mids, ...leaves];
    const t0 = performance.now();
    const cancelled = await invoke(request, root, "subagents", { action: "cancel", taskId: top.taskId });
    const answered = performance.now() - t0;
    if (cancelled.status !== "cancelled") throw new Error(`cancel: ${JSON.stringify(cancelled)}`);
    const ledgersEnded = await until("every descendant's task is cancelled", async () => {
      const rows = (await Promise.all(owners.map((o) => tasksOf(request, o)))).flat();
      return rows.length === everyone.length && rows.every((t) => t.status === "cancelled");
    });
    const atLedgers = performance.now() - t0;
    await until("every descendant's run has ended", async () => {
      const runs = await Promise.all(everyone.map((c) => request("GET", `/v1/runs/${enc(c.runId)}`)));
      return runs.every((r) => r.json.status === "aborted");
    });
    const atRuns = performance.now() - t0;
    void ledgersEnded;

    const by = Object.fromEntries(rows.map((r) => [r.name, r]));
    const bare = by["bare route"];
    const lines = [
      "| scenario | requests | requests/s | p50 ms | p99 ms | p50 vs bare route |",
      "|---|---:|---:|---:|---:|---:|",
      ...rows.map(
        (r) =>
          `| ${r.name} | ${r.requests} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${fmt(r.p50 / bare.p50, 2)}× |`,
      ),
      "",
      "| cancel of a 3-level tree of 20 children (1 + 4 + 16 below the requester) | ms |",
      "|---|---:|",
      `| \`subagents cancel\` answered (the first level's run settled) | ${fmt(answered, 0)} |`,
      `| every descendant's task \`cancelled\` in its parent's ledger | ${fmt(atLedgers, 0)} |`,
      `| every descendant's run ended \`aborted\` | ${fmt(atRuns, 0)} |`,
    ];
    return { lines };
  } finally {
    await hanging.stop();
  }
}

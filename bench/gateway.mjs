// Start and stop a local Switchboard gateway (wrangler dev) for the benchmark: loopback only, a fresh
// persistence directory, fixed tokens, bounded start-up, and a stop that always reaps the whole
// process group (wrangler spawns workerd as a child).
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname } from "node:path";

const READY_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 5_000;
const BUILD_TIMEOUT_MS = 120_000;

/** Stop functions of every gateway this process started, so an interrupt during start-up reaps it too. */
const running = new Set();

export async function stopAllGateways() {
  await Promise.all([...running].map((stop) => stop()));
}

/** Refuse to start when the port is taken (a forgotten gateway would silently be measured instead). */
async function assertPortFree(port) {
  await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", () =>
      reject(new Error(`port ${port} is already in use on 127.0.0.1; stop whatever listens there first`)),
    );
    srv.listen(port, "127.0.0.1", () => srv.close(resolve));
  });
}

/**
 * Bundle the bench Worker once into `outdir` (wrangler's own build, no upload). The gateway then serves
 * this snapshot, so edits to src/ during a run cannot reload the Worker mid-measurement.
 */
export async function buildSnapshot(outdir, logFile) {
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(dirname(logFile), { recursive: true });
  const log = openSync(logFile, "w");
  // The bench entry (bench/worker.ts): the production Worker plus the bench routes, which the
  // production bundle (src/index.ts) does not contain.
  const child = spawn("npx", ["wrangler", "deploy", "bench/worker.ts", "--dry-run", "--outdir", outdir], {
    stdio: ["ignore", log, log],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1" },
  });
  closeSync(log);
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), BUILD_TIMEOUT_MS);
    child.once("exit", (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  if (code !== 0) throw new Error(`building the Worker failed (exit ${code}); see ${logFile}`);
  return `${outdir}/worker.js`; // named after the entry, bench/worker.ts
}

/**
 * @param {{script: string, port: number, persistTo: string, logFile: string, envFile: string, vars: Record<string,string>, inspectorPort?: number}} opts
 * @returns {Promise<{base: string, stop: () => Promise<void>}>}
 */
export async function startGateway({ script, port, persistTo, logFile, envFile, vars, inspectorPort }) {
  await assertPortFree(port);
  if (inspectorPort !== undefined) await assertPortFree(inspectorPort);
  rmSync(persistTo, { recursive: true, force: true });
  mkdirSync(persistTo, { recursive: true });
  mkdirSync(dirname(logFile), { recursive: true });
  // An explicit (empty) env file stops wrangler from loading the developer's .dev.vars, whose tokens
  // would otherwise mix with the bench's fixed ones.
  writeFileSync(envFile, "# intentionally empty: the benchmark passes its variables with --var\n");
  const log = openSync(logFile, "w");
  const args = [
    "wrangler",
    "dev",
    script,
    "--no-bundle",
    "--port",
    String(port),
    "--ip",
    "127.0.0.1",
    "--persist-to",
    persistTo,
    "--env-file",
    envFile,
  ];
  // A fixed inspector port, so the bench can take a CPU profile of the gateway (bench/cpu-profile.mjs).
  if (inspectorPort !== undefined) args.push("--inspector-port", String(inspectorPort));
  args.push("--show-interactive-dev-session=false", "--log-level", process.env.BENCH_LOG_LEVEL ?? "warn");
  for (const [k, v] of Object.entries(vars)) args.push("--var", `${k}:${v}`);
  const child = spawn("npx", args, {
    detached: true, // own process group, so stop() reaches workerd too
    stdio: ["ignore", log, log],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1" },
  });
  closeSync(log);
  let exited = false;
  const exitedPromise = new Promise((resolve) =>
    child.once("exit", () => {
      exited = true;
      resolve();
    }),
  );

  const stop = async () => {
    running.delete(stop);
    if (exited) return;
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      return;
    }
    const timer = new Promise((r) => setTimeout(r, STOP_GRACE_MS));
    await Promise.race([exitedPromise, timer]);
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  };

  running.add(stop);
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) throw new Error(`wrangler dev exited before it was ready; see ${logFile}`);
    try {
      const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) {
        const body = await res.json();
        if (body.ok) return { base, stop, agents: body.agents };
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`gateway not ready after ${READY_TIMEOUT_MS / 1000}s; see ${logFile}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

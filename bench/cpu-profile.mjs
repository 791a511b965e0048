// Where the CPU of a call goes: a V8 CPU profile of the local gateway (workerd under `wrangler dev`, through
// wrangler's inspector proxy) taken while a batch of calls runs, each sample charged to the nearest frame of
// our own code (src/… or bench/…) on its stack. Everything — the Worker, every object, the runs the calls
// start — shares the one process, so the profile shows what a call costs the machine, by source file.
import { readFileSync } from "node:fs";

/** Sampling interval (µs): fine enough for ms-scale calls, coarse enough not to slow them much. */
const SAMPLING_US = 200;
const COMMAND_TIMEOUT_MS = 30_000;
/** Frames of the runtime itself, not JavaScript of any file. */
const RUNTIME = new Set(["(idle)", "(program)", "(garbage collector)", "(root)"]);
/** Native calls into SQLite, charged to the file that called them but counted apart. */
const SQLITE = new Set(["exec", "transactionSync", "toArray", "one", "raw", "next", "databaseSize"]);

/**
 * The bundle's source map by comment: wrangler's build (esbuild) marks where each module's code starts with
 * a `// path` line. Returns line (0-based, as the profiler counts) → module path.
 */
export function moduleLines(bundlePath) {
  const marks = [];
  const lines = readFileSync(bundlePath, "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = /^\/\/ ((?:src|bench|node_modules)\/\S+)$/.exec(lines[i]);
    if (m) marks.push([i, m[1]]);
  }
  return (line) => {
    let lo = 0;
    let hi = marks.length - 1;
    let found = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (marks[mid][0] <= line) {
        found = marks[mid][1];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  };
}

/** A DevTools-protocol session with the gateway's inspector (wrangler accepts local origins only). */
async function connect(inspectorPort) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const url = targets.find((t) => t.webSocketDebuggerUrl)?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target on port ${inspectorPort}`);
  const ws = new WebSocket(url, { headers: { Origin: "http://localhost" } });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error(`cannot open the inspector at ${url}`));
  });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(String(m.data));
    if (msg.id !== undefined && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  };
  const command = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const n = ++id;
      const timer = setTimeout(() => reject(new Error(`inspector: ${method} timed out`)), COMMAND_TIMEOUT_MS);
      pending.set(n, (msg) => {
        clearTimeout(timer);
        if (msg.error) reject(new Error(`inspector: ${method}: ${msg.error.message}`));
        else resolve(msg.result);
      });
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  return { command, close: () => ws.close() };
}

/**
 * Profile `fn` (which makes `calls` calls) and charge each sample: to the nearest src/ or bench/ module on
 * its stack; `sqlite` when its leaf is a native SQLite call. Returns CPU ms per call by module, the busy
 * (non-idle) ms per call, and the wall time (test/node/cpu-profile.test.ts).
 */
export async function profileCalls({ inspectorPort, moduleOf, calls, fn }) {
  const inspector = await connect(inspectorPort);
  try {
    await inspector.command("Profiler.enable");
    await inspector.command("Profiler.setSamplingInterval", { interval: SAMPLING_US });
    await inspector.command("Profiler.start");
    const t0 = performance.now();
    await fn();
    const wallMs = performance.now() - t0;
    const { profile } = await inspector.command("Profiler.stop");
    return { wallMs, ...chargeSamples(profile, moduleOf, calls) };
  } finally {
    inspector.close();
  }
}

/** `node_modules/@scope/name/…` → `@scope/name`; `node_modules/name/…` → `name`. */
function packageOf(path) {
  const parts = path.split("/");
  return parts[1].startsWith("@") ? `${parts[1]}/${parts[2]}` : parts[1];
}

export function chargeSamples(profile, moduleOf, calls) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byModule = new Map();
  let busyUs = 0;
  let idleUs = 0;
  profile.samples.forEach((sample, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const leaf = nodes.get(sample).callFrame;
    if (leaf.functionName === "(idle)") {
      idleUs += us;
      return;
    }
    busyUs += us;
    let owner = RUNTIME.has(leaf.functionName) ? leaf.functionName : null;
    let library = null;
    for (let at = sample; owner === null && at !== undefined; at = parent.get(at)) {
      const frame = nodes.get(at).callFrame;
      const mod = frame.url.endsWith("worker.js") ? moduleOf(frame.lineNumber) : null;
      if (mod?.startsWith("node_modules/")) library ??= packageOf(mod);
      else if (mod) owner = mod;
      else if (frame.url.startsWith("node:")) library ??= frame.url; // the runtime's Node.js modules
    }
    // An async continuation's stack holds no caller: such a sample is charged to the library it runs in.
    owner ??= library ? `${library} (no frame of ours on the stack)` : "(runtime, no JavaScript frame)";
    const row = byModule.get(owner) ?? { us: 0, sqliteUs: 0 };
    row.us += us;
    if (SQLITE.has(leaf.functionName) && leaf.url === "") row.sqliteUs += us;
    byModule.set(owner, row);
  });
  const perCall = (us) => us / 1000 / calls;
  const modules = [...byModule.entries()]
    .map(([module, r]) => ({ module, ms: perCall(r.us), sqliteMs: perCall(r.sqliteUs) }))
    .sort((a, b) => b.ms - a.ms);
  const sampledMs = profile.timeDeltas.reduce((a, b) => a + b, 0) / 1000;
  return { busyMsPerCall: perCall(busyUs), busyMs: busyUs / 1000, idleMs: idleUs / 1000, sampledMs, modules };
}

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the bench, without type declarations
import { chargeSamples, moduleLines } from "../../bench/cpu-profile.mjs";

/**
 * The bench's CPU attribution (bench/cpu-profile.mjs): each sample goes to the nearest module of ours on its
 * stack, else to the library it runs in, else to the runtime; SQLite leaves are counted apart; idle is not busy.
 */
describe("bench CPU profile attribution", () => {
  // A bundle as wrangler's build writes it: each module's code follows a `// path` line.
  const dir = mkdtempSync(join(tmpdir(), "cpu-profile-"));
  const bundle = join(dir, "worker.js");
  writeFileSync(
    bundle,
    [
      "// node_modules/ai/dist/index.js", // line 0
      "function step() {}", // 1
      "// src/registry/registry-object.ts", // 2
      "function upsert() {}", // 3
      "// src/session/enqueue.ts", // 4
      "function enqueueRun() {}", // 5
    ].join("\n"),
  );
  const moduleOf = moduleLines(bundle);
  const frame = (functionName: string, url = "", lineNumber = -1) => ({ functionName, url, lineNumber });

  it("maps bundle lines to the module that starts above them", () => {
    expect([0, 1, 3, 5, 99].map((l) => moduleOf(l))).toEqual([
      "node_modules/ai/dist/index.js",
      "node_modules/ai/dist/index.js",
      "src/registry/registry-object.ts",
      "src/session/enqueue.ts",
      "src/session/enqueue.ts",
    ]);
  });

  it("charges each sample to the nearest module of ours, a library, or the runtime, per call", () => {
    // root → enqueueRun (ours) → step (library) → exec (native SQLite): charged to enqueue.ts, as SQLite.
    // root → upsert (ours): registry-object.ts. root → step (library, no caller of ours): "ai …".
    // root → (garbage collector), root → (idle).
    const nodes = [
      { id: 1, callFrame: frame("(root)"), children: [2, 5, 6, 7, 8] },
      { id: 2, callFrame: frame("enqueueRun", "file:///b/worker.js", 5), children: [3] },
      { id: 3, callFrame: frame("step", "file:///b/worker.js", 1), children: [4] },
      { id: 4, callFrame: frame("exec") },
      { id: 5, callFrame: frame("upsert", "file:///b/worker.js", 3) },
      { id: 6, callFrame: frame("step", "file:///b/worker.js", 1) },
      { id: 7, callFrame: frame("(garbage collector)") },
      { id: 8, callFrame: frame("(idle)") },
    ];
    const samples = [4, 4, 5, 6, 7, 8, 8];
    const timeDeltas = [1000, 1000, 2000, 500, 500, 9000, 9000]; // µs
    const out = chargeSamples({ nodes, samples, timeDeltas }, moduleOf, 2);
    expect(out.busyMs).toBe(5);
    expect(out.busyMsPerCall).toBe(2.5);
    expect(out.idleMs).toBe(18);
    expect(out.modules).toEqual([
      { module: "src/session/enqueue.ts", ms: 1, sqliteMs: 1 },
      { module: "src/registry/registry-object.ts", ms: 1, sqliteMs: 0 },
      { module: "ai (no frame of ours on the stack)", ms: 0.25, sqliteMs: 0 },
      { module: "(garbage collector)", ms: 0.25, sqliteMs: 0 },
    ]);
  });
});

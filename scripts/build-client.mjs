#!/usr/bin/env node
// Builds the typed client's package entry (`switchboard/client`, package.json "exports"): the client bundled
// for any runtime with fetch (dist/client/index.js, ESM, its one dependency eventsource-parser inlined) and
// its declarations (dist/client/types/, from tsconfig.client.json). Runs on `npm install` (prepare), so an
// install from git can import it at once.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { build } from "esbuild";

rmSync("dist/client", { recursive: true, force: true });
await build({
  entryPoints: ["src/client/index.ts"],
  outfile: "dist/client/index.js",
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  mainFields: ["module", "main"],
  logLevel: "warning",
});
const tsc = spawnSync("npx", ["tsc", "-p", "tsconfig.client.json"], { stdio: "inherit" });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

#!/usr/bin/env node
// Builds `public/`, the Worker's static assets (wrangler.jsonc `assets`): runs every module in
// scripts/assets/*.mjs, in name order; each writes its own files under public/. The directory is
// generated and gitignored, so nothing vendored is committed. Runs before `wrangler dev`/`deploy`
// (wrangler.jsonc `build.command`) and before the tests (vitest.config.ts globalSetup).
import { mkdirSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export async function buildAssets() {
  const publicDir = join(root, "public");
  mkdirSync(publicDir, { recursive: true });
  const dir = join(root, "scripts", "assets");
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".mjs"))
    .sort()) {
    const mod = await import(pathToFileURL(join(dir, file)).href);
    await mod.default({ root, publicDir });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await buildAssets();
export default buildAssets;

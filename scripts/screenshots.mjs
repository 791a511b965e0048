#!/usr/bin/env node
// `npm run screenshots`: refresh docs/screenshots/ on purpose. The console's browser tests write their
// pictures to test-results/screenshots/ (ignored by git, so `npm test` changes no tracked file); this runs
// them with a browser required (REQUIRE_BROWSER=1: no silent skip) and copies what they took.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const taken = join("test-results", "screenshots");
const docs = join("docs", "screenshots");
rmSync(taken, { recursive: true, force: true });
const run = spawnSync("npx", ["vitest", "run", "--project", "browser", ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, REQUIRE_BROWSER: "1" },
});
if (run.status !== 0) process.exit(run.status ?? 1);
const pictures = existsSync(taken) ? readdirSync(taken).filter((f) => f.endsWith(".png")) : [];
if (pictures.length === 0) {
  console.error(`no screenshots in ${taken}`);
  process.exit(1);
}
for (const f of pictures) copyFileSync(join(taken, f), join(docs, f));
console.log(`copied ${pictures.length} screenshots to ${docs}/ — review them with git diff --stat ${docs}`);

import type { TestProject } from "vitest/node";
import { findChromium } from "./chromium";

/**
 * Global setup of the "browser" test project (vitest.config.ts): finds a Chromium that launches
 * (test/node/chromium.ts) and hands its path to the browser tests (`inject("chromium")`). Without one the
 * tests are skipped and one line says why and how to run them — unless REQUIRE_BROWSER=1 (set by .ci/run),
 * where a missing browser fails the run, so CI always proves the console.
 */
export default async function setup(project: TestProject): Promise<void> {
  const found = await findChromium();
  project.provide("chromium", found.path ?? "");
  if (found.path !== null) return;
  const why = found.tried.length > 0 ? found.tried.join("; ") : "no Chromium in the usual locations";
  const how =
    "set CHROMIUM_PATH to a Chromium or Chrome executable (on Linux x64 the @sparticuz/chromium dev dependency provides one)";
  if (process.env.REQUIRE_BROWSER === "1")
    throw new Error(`REQUIRE_BROWSER=1 but no Chromium could be launched (${why}); ${how}`);
  console.log(`[browser] console browser tests skipped: no Chromium could be launched (${why}). To run them, ${how}.`);
}

declare module "vitest" {
  export interface ProvidedContext {
    /** The Chromium executable the browser tests drive; "" when none was found (they are skipped). */
    chromium: string;
  }
}

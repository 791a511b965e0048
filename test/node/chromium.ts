import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

/**
 * Which Chromium the console's browser tests drive (docs/testing.md, "Browser tests"). Nothing here needs a
 * system package manager: on Linux x64 the `@sparticuz/chromium` dev dependency ships a Chromium inside its
 * npm tarball. In order:
 *   1. `CHROMIUM_PATH`, when set: that browser and no other (an explicit choice; a path that does not launch
 *      is reported, not silently replaced);
 *   2. the Chromium of `@sparticuz/chromium` (Linux x64; unpacked once into the system temp folder);
 *   3. the usual install locations on Linux and macOS, and Playwright's own browser cache.
 * Each candidate is launched once (headless) before it is chosen: a binary that exists but cannot start
 * (a missing system library, another CPU) is skipped with its reason.
 */

export const LAUNCH_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  // A page updated live is otherwise re-rastered in parts, and the edges of rounded borders come out
  // one colour step different from a one-pass raster: the screenshots would change between runs.
  "--disable-partial-raster",
];

export interface Candidate {
  /** Where it came from, for the report: "CHROMIUM_PATH", "@sparticuz/chromium", "installed". */
  source: string;
  /** The executable, or a function that finds (or unpacks) it. */
  path: string | (() => Promise<string>);
}

export type Found = { path: string; source: string } | { path: null; tried: string[] };

const INSTALLED = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
  "/usr/bin/google-chrome-stable",
  "/snap/bin/chromium",
  "/Applications/Chromium.app/Contents/MacOS/Chromium",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
  "/Applications/Google Chrome for Testing.app/Contents/MacOS/Google Chrome for Testing",
];

/** Executables Playwright's own installer (`npx playwright install chromium`) left in its cache. */
function playwrightCache(): string[] {
  const root =
    process.env.PLAYWRIGHT_BROWSERS_PATH ??
    (process.platform === "darwin"
      ? join(homedir(), "Library", "Caches", "ms-playwright")
      : join(homedir(), ".cache", "ms-playwright"));
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((d) => d.startsWith("chromium"))
    .sort()
    .reverse()
    .flatMap((d) => [
      join(root, d, "chrome-linux", "chrome"),
      join(root, d, "chrome-linux64", "chrome"),
      join(root, d, "chrome-mac", "Chromium.app", "Contents", "MacOS", "Chromium"),
      join(
        root,
        d,
        "chrome-mac-arm64",
        "Google Chrome for Testing.app",
        "Contents",
        "MacOS",
        "Google Chrome for Testing",
      ),
    ]);
}

async function npmShipped(): Promise<string> {
  if (process.platform !== "linux" || process.arch !== "x64")
    throw new Error(`ships a Linux x64 build only (this is ${process.platform} ${process.arch})`);
  const { default: Sparticuz } = await import("@sparticuz/chromium");
  return Sparticuz.executablePath();
}

export function defaultCandidates(env: Record<string, string | undefined> = process.env): Candidate[] {
  if (env.CHROMIUM_PATH) return [{ source: "CHROMIUM_PATH", path: env.CHROMIUM_PATH }];
  return [
    { source: "@sparticuz/chromium", path: npmShipped },
    ...[...INSTALLED, ...playwrightCache()].map((path) => ({ source: "installed", path })),
  ];
}

/** The first candidate that launches; else what was tried and why each failed. */
export async function findChromium(candidates: Candidate[] = defaultCandidates()): Promise<Found> {
  const tried: string[] = [];
  for (const c of candidates) {
    let path = typeof c.path === "string" ? c.path : "";
    try {
      if (typeof c.path !== "string") path = await c.path();
      else if (!existsSync(path)) {
        // Absent install locations are the common case: named only when asked for by CHROMIUM_PATH.
        if (c.source === "CHROMIUM_PATH") tried.push(`CHROMIUM_PATH=${path}: no such file`);
        continue;
      }
      const browser = await chromium.launch({
        executablePath: path,
        headless: true,
        args: LAUNCH_ARGS,
        timeout: 30_000,
      });
      await browser.close();
      return { path, source: c.source };
    } catch (err) {
      const why = (err as Error).message.split("\n")[0].slice(0, 200);
      tried.push(`${c.source}${path ? ` (${path})` : ""}: ${why}`);
    }
  }
  return { path: null, tried };
}

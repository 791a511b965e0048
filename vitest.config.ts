import { randomBytes } from "node:crypto";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";

// The browser tests (the console, and the CSP of /console and /docs in a browser): a project of their own, so
// its global setup (finding a Chromium) runs only when they are part of the run.
const BROWSER_TESTS = ["test/node/console-*.test.ts", "test/node/browser-pages.test.ts"];

// The test Worker's secrets: random per run and as strong as a deploy needs (src/config/secrets.ts refuses
// short and example values); tests read them from `env` (test/helpers/http.ts), never from a literal.
const secret = () => randomBytes(32).toString("base64url");
const SECRETS = {
  GATEWAY_TOKEN: secret(),
  AGENT_TOKENS: JSON.stringify({ main: secret(), research: secret() }),
  SIGNING_SECRET: secret(),
};
// Also where wrangler looks for the secrets wrangler.jsonc requires (`secrets.required`: .dev.vars, else the
// environment): a fresh clone has no .dev.vars, and wrangler would warn once per test file that they are missing.
Object.assign(process.env, SECRETS);

// Wrangler's informational lines (e.g. "Using secrets defined in .dev.vars", once per test file after
// `npm start` wrote that file) are not test output; its warnings and errors still show.
process.env.WRANGLER_LOG ??= "warn";

// What this process's stderr gets outside any test, so vitest cannot hold it back for a failure as it does with
// what a test logs, and which no test can act on: workerd's bookkeeping, written by the pool — alarms cancelled
// or run late around the restarts tests make, and the abort test/helpers/restart.ts crash() provokes on purpose
// (the pool drops their kin itself, with its own ignore list; these it does not know) — and Vite's note, once
// per file, that a dependency's published sourcemap names files its package does not ship. Everything else
// written to stderr still shows.
const OUTSIDE_ANY_TEST = [
  /^NOSENTRY SQLite alarm (handler canceled|overdue)/,
  /jsg\.Error: test: the instance crashed/,
  /Sourcemap for "[^"]*\/node_modules\/[^"]*" points to missing source files/,
];
const writeStderr = process.stderr.write.bind(process.stderr);
process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) =>
  OUTSIDE_ANY_TEST.some((re) => re.test(String(chunk))) || writeStderr(chunk, ...rest)) as typeof process.stderr.write;

export default defineConfig({
  test: {
    // The Worker's static assets (public/, wrangler.jsonc "assets") are generated: build them first.
    globalSetup: ["./scripts/build-assets.mjs"],
    // A passing run prints vitest's summary only: the Worker's JSON request and run logs (and the bad-input
    // suite's [fuzz] lines) are kept back and printed with a failing test's report.
    silent: "passed-only",
    // A passing file is one line; only a test slower than this is listed under it (the default, 300 ms,
    // lists dozens more on a loaded machine, so the output's length followed the machine's load).
    slowTestThreshold: 5_000,
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.jsonc" },
            // workerd's own diagnostics (uncaught exceptions a test provokes on purpose, alarm cancellations,
            // restarted objects) are not printed: they belong to no test, so vitest cannot hold
            // them back for a failure. What a test's code logs is still captured and shown when it fails.
            verbose: false,
            miniflare: {
              bindings: SECRETS,
            },
          }),
        ],
        test: {
          name: "workers",
          // Test folders mirror src/ (test/README.md maps each file to what it proves); test/node/ runs in Node.
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/node/**"],
          // What every file resets after each test (the CONFIG override, spies, held fake calls).
          setupFiles: ["./test/setup.ts"],
          testTimeout: 30_000,
          // Files run in parallel, each in its own runtime; a test restarts only the objects it owns
          // (test/helpers/restart.ts). One worker per core: vitest's default leaves one core idle, which on a
          // two-core machine means one file at a time (measured: 2 workers take 0.87x the time of 1).
          maxWorkers: "100%",
        },
      },
      {
        // Checks that need Node: an OpenAPI validator that compiles schemas to code, and `wrangler dev`.
        test: {
          name: "node",
          include: ["test/node/*.test.ts"],
          exclude: BROWSER_TESTS,
          environment: "node",
          testTimeout: 60_000,
        },
      },
      {
        // The operator console in Chromium (test/node/chromium.ts says which one): skipped with one line
        // saying why when none launches, a failure instead under REQUIRE_BROWSER=1 (.ci/run).
        test: {
          name: "browser",
          include: BROWSER_TESTS,
          globalSetup: ["./test/node/browser-setup.ts"],
          environment: "node",
          testTimeout: 60_000,
          // Each file runs a Worker under wrangler dev and a Chromium: one at a time, so their timing-sensitive
          // checks (a stream dropped mid-reply, a box turning "done") do not compete for the CPU.
          fileParallelism: false,
        },
      },
    ],
  },
});

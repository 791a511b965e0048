import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// The console's browser tests: a project of their own, so its global setup (finding a Chromium) runs only
// when they are part of the run.
const BROWSER_TESTS = ["test/node/console-*.test.ts"];

export default defineConfig({
  test: {
    // The Worker's static assets (public/, wrangler.toml [assets]) are generated: build them first.
    globalSetup: ["./scripts/build-assets.mjs"],
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                GATEWAY_TOKEN: "test-gateway-token",
                AGENT_TOKENS: JSON.stringify({ main: "test-main-agent-token", research: "test-research-token" }),
                SIGNING_SECRET: "test-signing-secret",
              },
            },
          }),
        ],
        test: {
          name: "workers",
          include: ["test/*.test.ts"],
          testTimeout: 30_000,
          // Eviction tests call abortAllDurableObjects(), which resets every object in the shared runtime —
          // including the runners of test files executing at the same time. Files therefore run one after
          // another; tests inside a file still run in order as usual.
          fileParallelism: false,
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
        },
      },
    ],
  },
});

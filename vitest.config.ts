import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";

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
          // Test folders mirror src/ (test/README.md maps each file to what it proves); test/node/ runs in Node.
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/node/**"],
          // What every file resets after each test (the CONFIG override, spies, held fake calls).
          setupFiles: ["./test/setup.ts"],
          testTimeout: 30_000,
          // Eviction tests call abortAllDurableObjects(), which resets every object in the shared runtime —
          // including the runners of test files executing at the same time. Files therefore run one after
          // another; tests inside a file still run in order as usual.
          fileParallelism: false,
        },
      },
      {
        // Checks that need Node: an OpenAPI validator that compiles schemas to code, and `wrangler dev`.
        test: { name: "node", include: ["test/node/*.test.ts"], environment: "node", testTimeout: 60_000 },
      },
    ],
  },
});

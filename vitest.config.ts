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
          // Files run in parallel, each in its own runtime; a test restarts only the objects it owns
          // (test/helpers/restart.ts). One worker per core: vitest's default leaves one core idle, which on a
          // two-core machine means one file at a time (measured: 2 workers take 0.87x the time of 1).
          maxWorkers: "100%",
        },
      },
      {
        // Checks that need Node: an OpenAPI validator that compiles schemas to code, and `wrangler dev`.
        test: { name: "node", include: ["test/node/*.test.ts"], environment: "node", testTimeout: 60_000 },
      },
    ],
  },
});

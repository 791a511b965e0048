import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig({
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
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    // Eviction tests call abortAllDurableObjects(), which resets every object in the shared runtime —
    // including the runners of test files executing at the same time. Files therefore run one after
    // another; tests inside a file still run in order as usual.
    fileParallelism: false,
  },
});

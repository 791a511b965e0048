import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          GATEWAY_TOKEN: "test-gateway-token",
          AGENT_TOKENS: JSON.stringify({ main: "test-main-token", research: "test-research-token" }),
          SIGNING_SECRET: "test-signing-secret",
        },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
  },
});

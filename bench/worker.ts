/**
 * The bench Worker (`npm run bench` bundles this file instead of src/index.ts): the production Worker
 * plus the benchmark's bare and seeding routes (bench/routes.ts) and their session-object calls
 * (bench/session-seeding.ts). Nothing here is part of the production bundle.
 */
import { createApp } from "../src/http/app";
import "../src/index"; // every production extension, registered exactly as in production
import { benchRoutes } from "./routes";
import "./session-seeding";

export { RegistryObject } from "../src/registry/registry-object";
export { SessionObject } from "../src/session/session-object";

export const benchApp = createApp(benchRoutes);

export default {
  fetch: benchApp.fetch,
} satisfies ExportedHandler<Env>;

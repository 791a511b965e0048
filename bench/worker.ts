/**
 * The bench Worker (`npm run bench` bundles this file instead of src/index.ts): the production Worker
 * plus the benchmark's bare and seeding routes (bench/routes.ts) and their session-object calls
 * (bench/session-seeding.ts). Nothing here is part of the production bundle.
 */
import { SESSION_EXTENSIONS } from "../src/extensions";
import { createApp } from "../src/http/app";
import { CORE_TIMER_KINDS } from "../src/session/core-timers";
import { SessionExtensions } from "../src/session/extensions";
import { SessionObject as ProductionSessionObject } from "../src/session/session-object";
import { benchRoutes } from "./routes";
import { benchExtension } from "./session-seeding";

export { SubagentLaneObject } from "../src/lane/subagent-lane-object";
export { RegistryObject } from "../src/registry/registry-object";
export { SearchIndexObject } from "../src/search/search-index-object";

/** Every production extension, in production order, then the bench's calls. */
export const benchExtensions = new SessionExtensions([...SESSION_EXTENSIONS, benchExtension], CORE_TIMER_KINDS);

/** The production session object with the bench extension added. */
export class SessionObject extends ProductionSessionObject {
  static override extensions = benchExtensions;
}

export const benchApp = createApp(benchRoutes);

export default {
  fetch: benchApp.fetch,
} satisfies ExportedHandler<Env>;

/**
 * Switchboard — the session layer for AI agents (docs/architecture.md).
 * The Worker (Hono, src/http/app.ts) authenticates and routes tool calls (src/tools/registry.ts lists
 * them); one SessionObject per session holds its transcript, runs and timers, made of the extensions
 * src/extensions.ts lists; one RegistryObject per index shard lists sessions; one SubagentLaneObject
 * limits how many sub-agent tasks run at once.
 */
import { createApp } from "./http/app";

export { SubagentLaneObject } from "./lane/subagent-lane-object";
export { RegistryObject } from "./registry/registry-object";
export { SearchIndexObject } from "./search/search-index-object";
export { SessionObject } from "./session/session-object";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;

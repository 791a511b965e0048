/**
 * Switchboard — the session layer for AI agents (DESIGN §1).
 * The Worker (Hono) authenticates and routes tool calls; one SessionObject per session holds its
 * transcript, runs and timers; one RegistryObject per agent indexes sessions for listing.
 */
import { createApp } from "./http/app";

export { SessionObject } from "./session/session-object";
export { RegistryObject } from "./registry/registry-object";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;

/**
 * Switchboard — the session layer for AI agents (docs/architecture.md).
 * The Worker (Hono) authenticates and routes tool calls; one SessionObject per session holds its
 * transcript, runs and timers; one RegistryObject per agent indexes sessions for listing.
 */
import { createApp } from "./http/app";
import "./runners/builtin-run"; // the built-in model runner
import "./runners/webhook-runner"; // agents whose runtime is a webhook
import "./channels/outbox"; // the one outbound delivery chokepoint (deliver:true replies, announces)
import "./policy/send-command"; // the owner's standalone /send on|off|inherit
import "./tools/sessions-send"; // sessions_send and its agent-to-agent flow
import "./tools/sessions-spawn"; // sessions_spawn
import "./spawn/subagent-lifecycle"; // sub-agent announce, hand-off, archive and delete
import "./spawn/subagent-lane-client"; // maxConcurrent: a sub-agent task starts when the lane grants it a slot
import "./session/dead-timer-rpc"; // dead timers over /v1 (GET …/timers/dead, retry)
import "./session/send-into-rpc"; // sessions_send: target checks + enqueue in one call
import "./session/runs-list-rpc"; // a session's recent runs over /v1 (GET …/runs, the console)
import "./session/run-log"; // one run_ended log line per run (src/log.ts)
import "./spawn/thread-binding"; // thread=true: a thread key whose inbound messages run in the sub-agent

export { RegistryObject } from "./registry/registry-object";
export { SessionObject } from "./session/session-object";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;

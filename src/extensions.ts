import { a2aPushExtension } from "./a2a/push";
import { outboxExtension } from "./channels/outbox";
import { watchersExtension } from "./events/watchers";
import { sendCommandExtension } from "./policy/send-command";
import { modelRunnerExtension } from "./runners/builtin-run";
import { webhookRunnerExtension } from "./runners/webhook-runner";
import { searchFeedExtension } from "./search/feed";
import { a2aFlowExtension } from "./send/a2a-flow";
import { sendModesExtension } from "./send/send-modes";
import { CORE_TIMER_KINDS } from "./session/core-timers";
import { deadTimersExtension } from "./session/dead-timer-rpc";
import { type SessionExtension, SessionExtensions } from "./session/extensions";
import { runLogExtension } from "./session/run-log";
import { runsListExtension } from "./session/runs-list-rpc";
import { sendIntoExtension } from "./session/send-into-rpc";
import { sessionStatusExtension } from "./session/status-rpc";
import { requesterExtension } from "./spawn/requester-side";
import { requesterTurnExtension } from "./spawn/requester-turn";
import { subagentLaneExtension } from "./spawn/subagent-lane-client";
import { subagentLifecycleExtension } from "./spawn/subagent-lifecycle";
import { threadBindingExtension } from "./spawn/thread-binding";
import { yieldBatchExtension } from "./spawn/yield-batch";
import { taskLedgerExtension } from "./tasks/task-ledger";

/**
 * What a session object is made of beyond its core (src/session/session-object.ts): its extensions, in
 * the order their hooks run (AGENTS.md, "Add a session extension"). Each sees the object only through
 * its host surface (src/session/host.ts). The order matters where hooks share a moment: `onRunEnded`
 * hooks write in this order inside the run-ending transaction, `afterRunEnded` work starts in this order
 * (the run log last), `beforeDelete` releases in this order. Runners claim disjoint runs, and each timer
 * kind has one owner, so for those the order does not matter.
 */
export const SESSION_EXTENSIONS: readonly SessionExtension[] = [
  outboxExtension, // the one outbound delivery chokepoint (deliver:true replies, announces)
  a2aFlowExtension, // sessions_send's agent-to-agent flow: reply-back turns and the announce step
  runsListExtension, // a session's recent runs over /v1 (GET …/runs, the console)
  webhookRunnerExtension, // runner: agents whose runtime is a webhook
  modelRunnerExtension, // runner: the built-in model runner (AI SDK)
  sendCommandExtension, // runner: the owner's standalone /send on|off|inherit
  requesterTurnExtension, // requester: sub-agent results reach its model in completion turns
  requesterExtension, // requester: child slots, announces handed to it, undelivered-announce notices
  yieldBatchExtension, // requester: sessions_yield — one resume turn once a yielded turn's children all ended
  threadBindingExtension, // thread=true: a thread key whose inbound messages run in the sub-agent
  subagentLifecycleExtension, // child: announce, hand-off, archive and delete
  subagentLaneExtension, // child: maxConcurrent — a task starts when the lane grants it a slot
  taskLedgerExtension, // task ledger: the tasks this session started, and reports on the one it runs (docs/tasks.md)
  deadTimersExtension, // dead timers over /v1 (GET …/timers/dead, retry)
  sendIntoExtension, // sessions_send: target checks + enqueue in one call
  sendModesExtension, // sessions_send steer/notify: durable rows, drained at a step / the next turn
  watchersExtension, // sessions_send watch: a target's watchers, their change notices, a watcher's acknowledgements
  sessionStatusExtension, // session_status: the card's facts, the model override, changesSince
  searchFeedExtension, // sessions_search: new user/assistant messages pushed to the agent's search index
  a2aPushExtension, // A2A push notifications: a task's configs, one outbox delivery per config and state
  runLogExtension, // one run_ended log line per run (src/log.ts)
];

/** The installed list, checked once per isolate (unique names and timer kinds; src/session/extensions.ts). */
export const sessionExtensions = new SessionExtensions(SESSION_EXTENSIONS, CORE_TIMER_KINDS);

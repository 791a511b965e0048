/**
 * The longer prose of the API reference (/openapi.json, /docs), one named constant per route, so each
 * route's definition in src/http/routes/ reads in one screen. The full contract is docs/contract.md.
 */

export const INBOUND_MESSAGE_TEXT =
  "Creates the session on first use and records the delivery route. With `deliver: true` the reply goes out through the channel's `outbound` webhook (send policy applies). A `message` over `limits.maxMessageBytes` (512 KiB of UTF-8 by default, docs/limits.md) is a 413 naming the field; nothing is stored. `senderIsOwner: true` needs the operator token (403). A 409 when the session is being deleted or archived, or its agent is unavailable (a runtime this gateway cannot run, named on GET /healthz).";

export const SESSION_PATCH_TEXT = "`sendPolicy` needs the operator token (403). A body that changes nothing is a 400.";

export const TRANSCRIPT_EXPORT_TEXT =
  "One session header line, then one line per message. An archived session's transcript comes from the archive (header `X-Switchboard-Archived: true`).";

export const RUNS_LIST_TEXT =
  "Reply and error texts are cut to 1000 characters (`textTruncated`); GET /v1/runs/{id} has them whole.";

export const DEAD_TIMER_RETRY_TEXT = "A 409 when its death ended a flow: start the work again instead.";

export const RUN_WAIT_TEXT =
  "Returns when the run ends, or after `timeoutMs` with the run as it is (a status that is not final). Call again after a reconnect.";

export const RUN_ABORT_TEXT =
  "Ends a queued or running run `aborted`, the same abort as MCP `tasks/cancel` and A2A `CancelTask` on the same id. A sub-agent's task run (its `taskId` is set) cancels that ledger task and every task below it, so the child's own sub-agents end too. A run that already ended is answered unchanged: the abort is applied once (docs/protocols.md, \"One handle\").";

export const RUN_COMPLETE_TEXT =
  "A webhook runtime that answered 202 sends the run's `{reply}` or `{error}` here with the run token it received. The token stops working when the run ends.";

export const RUN_HEARTBEAT_TEXT =
  'A webhook runtime holding a run (it answered 202) renews the run\'s lease here with its run token and receives a fresh token, signed with the current SIGNING_SECRET: use it from now on. A run without a deadline ends `lost` when neither a completion nor a heartbeat arrives within `leaseMs` (10 min) of the 202 or of the last heartbeat (docs/contract.md, "Runs").';

export const SESSION_EVENTS_TEXT =
  "Each event has an opaque `id`. `Last-Event-ID` (or `lastEventId`) resumes after it with nothing missed or repeated; an id of an earlier incarnation of the session (deleted and created again) starts over with a `reset` event; `0` replays everything retained; without it the stream starts live. The stream of a session that is deleted or archived ends with an `end` event, as does every stream after 15 min (`lifetime`: resume with `Last-Event-ID`) and one opened with a run token when its run ends (`token_expired`). Heartbeat `: ping` every 15 s.";

export const RUN_EVENTS_TEXT =
  "Each event has an opaque `id`; `Last-Event-ID` (or `lastEventId`) resumes a running run after it without repeats, or starts over with a `reset` event and the current step's text so far when that point is no longer kept (docs/events.md). A run that already ended replays its reply as one `delta`, then `status`, and the stream closes. Streams end with an `end` event after 15 min (`lifetime`) or when the run token that opened them expires (`token_expired`).";

export const TOOLS_INVOKE_TEXT =
  'Tool refusals defined by the spec (`{status: "forbidden"|"error", error}`) are 200 results. `sessionKey` (or the `X-Session-Key` header) is the requester session; `dryRun` validates and echoes the arguments without running the tool. The text block is the payload as JSON, except for `session_status`, whose text is its status card (the JSON is in `details`).';

export const MCP_TEXT =
  "Served by the official MCP server SDK, stateless (no `Mcp-Session-Id`): protocol 2026-07-28 (the current revision: `server/discover`, per-request `_meta` envelope) and 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07 (initialize, ping, tools/list, tools/call). `MCP-Protocol-Version` names the revision; another value is a 400. JSON-RPC batches (at most 20 messages) only before 2025-06-18. A foreign `Origin` is a 403 (docs/protocols.md). Same tools, schemas and handlers as /tools/invoke. Protocol errors are JSON-RPC errors; authentication errors use the error envelope. A single waiting `sessions_send` call with `params._meta.progressToken`, from a client that accepts `text/event-stream`, is answered as an event stream: `notifications/progress` messages while it waits, then the response (docs/events.md).";

export const HEALTHZ_TEXT =
  "With the operator token also `warnings` — agents that cannot run and models that do not resolve, values mapped or clamped, every ignored key (grouped, never cut; docs/openclaw-carry-over.md) — and the archive bucket's status. A token that is sent is checked (401, 429).";

export const MCP_CARD_TEXT =
  "Public (no token): the server's name and version, the `/mcp` remote with the protocol revisions it serves and the headers it takes, and under `_meta` every tool's name and description (docs/protocols.md). Nothing about agents, sessions, tokens or configuration. `Accept: application/mcp-server-card+json` gets that media type.";

export const TASK_LIST_TEXT =
  "Every background task this session started (a sub-agent, a `sessions_yield` wait, a `sessions_send` that outlived its wait) with its status: `queued`, `running`, then one of `succeeded`, `failed`, `timed_out`, `cancelled`, `lost`, which never changes once reached. Open tasks and those updated within `recentMinutes`, newest update first. Ended tasks are kept 7 days, lost ones 24 h (docs/tasks.md).";

export const TASK_AUDIT_TEXT =
  "OpenClaw's audit codes over this session's ledger: `stale_queued` (queued > 10 min), `stale_running` (running > 30 min, an error), `lost`, `delivery_failed`, `missing_cleanup`, `inconsistent_timestamps`; at most 200 findings (docs/tasks.md).";

export const TASK_CANCEL_TEXT =
  "The task is recorded `cancelled` (\"Cancelled by operator.\"), its child's runs are aborted, and so, level by level, are every task and run below it, each through a durable step that survives restarts; each cancelled child tells its parent once. Answered once the first level's runs have ended (docs/tasks.md).";

export const A2A_CARD_TEXT =
  "Public (no token): the agent's A2A v1 card — its name, its JSON-RPC endpoint (`/a2a/{agentId}`), streaming, its skill, and the bearer tokens it accepts (the gateway token or that agent's own). Nothing secret: no system prompt, model or token (docs/protocols.md, \"A2A\").";

export const A2A_RPC_TEXT =
  "A2A v1 JSON-RPC binding (official A2A SDK transport; send `A2A-Version: 1.0`). `SendMessage` / `SendStreamingMessage` queue the message as a run of the session its `contextId` names (`agent:{agentId}:{contextId}`; none: a new `a2a:<uuid>` context); the task id IS the run id (`GET /v1/runs/{id}`). `GetTask`, `CancelTask` (aborts the run), `SubscribeToTask` (resumes from `Last-Event-ID`). Run states map onto task states as docs/protocols.md tabulates. A2A errors are JSON-RPC errors with status 200; authentication errors use the error envelope. The gateway token or this agent's token; another agent's token is a 403.";

export const A2A_REST_TEXT =
  "A2A v1 HTTP+JSON binding (the paths of the official A2A SDK's REST transport, under the agent's A2A URL; send `A2A-Version: 1.0`): the same methods as the JSON-RPC endpoint `POST /a2a/{agentId}`, answered by the same handler. Bodies and answers are the JSON forms of A2A's messages (`application/a2a+json`); streams are `text/event-stream` of `StreamResponse`s whose SSE `id:` is a resume point for `Last-Event-ID`. A2A errors are HTTP 400/404 with a google.rpc.Status body; authentication and scope errors use the error envelope (docs/protocols.md, \"A2A\").";

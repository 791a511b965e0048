/**
 * Typed Switchboard client for agent runtimes (Node, Deno, Bun, browsers, Workers).
 *
 * Only `import type` below: the argument and result types come from the gateway's own zod schemas
 * and result types, and nothing of the Worker is loaded at runtime — this file needs `fetch` only.
 *
 *   const sb = new SwitchboardClient({ baseUrl: "https://switchboard.example", token });
 *   const { sessions } = await sb.sessionsList({ limit: 10 });
 *   const tools = await sb.toolDefinitions("openai");   // hand these to any LLM framework
 */
import type { z } from "zod";
import type { agentsSchema } from "../http/api-schemas";
import type { inboundMessage, sessionPatch } from "../http/routes/session-schemas";
import type { SessionRow } from "../registry/row";
import type { SessionTree } from "../registry/subagent-tree";
import type { RunCompletion } from "../runners/webhook-runner";
import type { runHeartbeatSchema } from "../session/run-schema";
import type { RunSnapshot } from "../session/types";
import type { TaskAudit } from "../tasks/task-audit";
import type { TaskRecord } from "../tasks/task-types";
import type { AgentsListResult, agentsListSchema } from "../tools/agents-list";
import type { Refusal } from "../tools/context";
import type { JsonSchema, ToolDescriptor } from "../tools/json-schema";
import type { SessionStatusResult, sessionStatusSchema } from "../tools/session-status";
import type { SessionsHistoryResult, sessionsHistorySchema } from "../tools/sessions-history";
import type { SessionsListResult, sessionsListSchema } from "../tools/sessions-list";
import type { SessionsSearchResult, sessionsSearchSchema } from "../tools/sessions-search";
import type { SessionsSendResult, sessionsSendSchema } from "../tools/sessions-send";
import type { SessionsSpawnAccepted, sessionsSpawnSchema } from "../tools/sessions-spawn-schema";
import type { SessionsYieldResult, sessionsYieldSchema } from "../tools/sessions-yield";
import type { CancelResult, ListResult, subagentsSchema } from "../tools/subagents";
import type { WaitResult } from "../tools/subagents-wait";

import { SwitchboardApiError } from "./errors";
import { type StreamEvent, type WatchOptions, watchEvents } from "./watch";

export type {
  JsonSchema,
  Refusal,
  RunSnapshot,
  SessionRow,
  SessionTree,
  StreamEvent,
  TaskAudit,
  TaskRecord,
  ToolDescriptor,
  WatchOptions,
};
export { SwitchboardApiError };

/** Arguments of each tool, as a caller sends them (derived from the tool's zod schema). */
export interface ToolArgs {
  sessions_list: z.input<typeof sessionsListSchema>;
  sessions_history: z.input<typeof sessionsHistorySchema>;
  sessions_search: z.input<typeof sessionsSearchSchema>;
  sessions_send: z.input<typeof sessionsSendSchema>;
  sessions_spawn: z.input<typeof sessionsSpawnSchema>;
  agents_list: z.input<typeof agentsListSchema>;
  session_status: z.input<typeof sessionStatusSchema>;
  sessions_yield: z.input<typeof sessionsYieldSchema>;
  subagents: z.input<typeof subagentsSchema>;
}

/** Payload of each tool (`result.details` of /tools/invoke). Refusals are results, not errors. */
export interface ToolResults {
  sessions_list: SessionsListResult;
  sessions_history: SessionsHistoryResult | Refusal;
  sessions_search: SessionsSearchResult | Refusal;
  sessions_send: SessionsSendResult;
  sessions_spawn: SessionsSpawnAccepted | Refusal;
  agents_list: AgentsListResult;
  session_status: SessionStatusResult | Refusal;
  sessions_yield: SessionsYieldResult | Refusal;
  subagents: ListResult | WaitResult | CancelResult | Refusal;
}

export type ToolName = keyof ToolArgs;
export type InboundMessage = z.input<typeof inboundMessage>;
/** `POST /v1/runs/{id}/heartbeat`: the run, its renewed lease and a fresh run token. */
export type RunHeartbeat = z.infer<typeof runHeartbeatSchema>;
/** `GET /v1/agents`: the configured agents, with whether each can run here (`available`) and why not. */
export type AgentsInfo = z.infer<typeof agentsSchema>;
export type SessionPatch = z.input<typeof sessionPatch>;
export type { RunCompletion };

/** OpenAI Chat Completions / Responses function tool. */
export interface OpenAIFunctionTool {
  type: "function";
  function: { name: string; description: string; parameters: JsonSchema };
}

/**
 * AI SDK-friendly tool: wrap `inputSchema` with `jsonSchema()` from "ai" and pass to `tool()`;
 * `execute` calls the gateway as this client's session.
 */
export interface AiSdkToolDefinition {
  description: string;
  inputSchema: JsonSchema;
  execute: (args: Record<string, unknown>) => Promise<unknown>;
}

export interface SwitchboardClientOptions {
  /** Gateway origin, e.g. `https://switchboard.example.workers.dev`. */
  baseUrl: string;
  /** GATEWAY_TOKEN, an agent token, or a webhook run token. */
  token: string;
  /** Requester session for tool calls (default: `main` of the token's agent; a run token's own session). */
  sessionKey?: string;
  fetch?: (input: string, init?: RequestInit) => Promise<Response>;
}

export class SwitchboardClient {
  private readonly baseUrl: string;
  private readonly doFetch: (input: string, init?: RequestInit) => Promise<Response>;

  constructor(private readonly opts: SwitchboardClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.doFetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** The same client acting as another requester session. */
  as(sessionKey: string): SwitchboardClient {
    return new SwitchboardClient({ ...this.opts, sessionKey });
  }

  // ------------------------------------------------------------ tools (POST /tools/invoke)

  /** Invoke any tool; typed for the known ones, open for tools added later. */
  invoke<N extends ToolName>(tool: N, args: ToolArgs[N]): Promise<ToolResults[N]>;
  invoke(tool: string, args?: Record<string, unknown>): Promise<unknown>;
  async invoke(tool: string, args: Record<string, unknown> = {}): Promise<unknown> {
    const body = { tool, args, ...(this.opts.sessionKey ? { sessionKey: this.opts.sessionKey } : {}) };
    const res = await this.request<{ ok: true; result: { details: unknown } }>("POST", "/tools/invoke", body);
    return res.result.details;
  }

  sessionsList(args: ToolArgs["sessions_list"] = {}) {
    return this.invoke("sessions_list", args);
  }
  sessionsHistory(args: ToolArgs["sessions_history"]) {
    return this.invoke("sessions_history", args);
  }
  /** Full-text search; reopen a hit with `sessionsHistory({sessionKey, messageId, sessionId})` (docs/search.md). */
  sessionsSearch(args: ToolArgs["sessions_search"]) {
    return this.invoke("sessions_search", args);
  }
  sessionsSend(args: ToolArgs["sessions_send"]) {
    return this.invoke("sessions_send", args);
  }
  sessionsSpawn(args: ToolArgs["sessions_spawn"]) {
    return this.invoke("sessions_spawn", args);
  }
  agentsList() {
    return this.invoke("agents_list", {});
  }
  /** The status card (`statusText`) and facts of a session; `model` sets its override, `changesSince` lists state changes. */
  sessionStatus(args: ToolArgs["session_status"] = {}) {
    return this.invoke("session_status", args);
  }
  /** Ends a model turn inside a built-in run; over HTTP there is none, so this answers the spec's error (docs/subagents.md). */
  sessionsYield(args: ToolArgs["sessions_yield"] = {}) {
    return this.invoke("sessions_yield", args);
  }
  /** The task ledger of this session's tree: `list`, `wait` for `taskIds`, `cancel` a `taskId` and all below it. */
  subagents(args: ToolArgs["subagents"] = {}) {
    return this.invoke("subagents", args);
  }

  /** The tools this caller may use (`GET /v1/tools`), as JSON-Schema function definitions. */
  async tools(): Promise<ToolDescriptor[]> {
    return (await this.request<{ tools: ToolDescriptor[] }>("GET", "/v1/tools")).tools;
  }

  /**
   * The caller's tools for an LLM framework. The schemas come from the gateway (derived from its zod
   * schemas, filtered for this caller — a sub-agent's token gets the sub-agent set), so they never drift.
   */
  async toolDefinitions(format: "openai"): Promise<OpenAIFunctionTool[]>;
  async toolDefinitions(format: "ai-sdk"): Promise<Record<string, AiSdkToolDefinition>>;
  async toolDefinitions(
    format: "openai" | "ai-sdk",
  ): Promise<OpenAIFunctionTool[] | Record<string, AiSdkToolDefinition>> {
    const tools = await this.tools();
    return format === "openai" ? toOpenAITools(tools) : toAiSdkTools(tools, (name, args) => this.invoke(name, args));
  }

  // ------------------------------------------------------------ REST (/v1)

  sendMessage(
    sessionKey: string,
    body: InboundMessage,
  ): Promise<{ runId: string; status: "accepted"; sessionKey: string }> {
    return this.request("POST", `/v1/sessions/${encodeURIComponent(sessionKey)}/messages`, body);
  }
  listSessions(
    query: { agentId?: string; limit?: number; kinds?: string[]; activeMinutes?: number; cursor?: string } = {},
  ): Promise<{ count: number; sessions: SessionRow[]; nextCursor: string | null }> {
    return this.request("GET", `/v1/sessions${qs({ ...query, kinds: query.kinds?.join(",") })}`);
  }
  getSession(sessionKey: string): Promise<SessionRow> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(sessionKey)}`);
  }
  patchSession(sessionKey: string, patch: SessionPatch): Promise<SessionRow> {
    return this.request("PATCH", `/v1/sessions/${encodeURIComponent(sessionKey)}`, patch);
  }
  deleteSession(sessionKey: string): Promise<{ ok: true; deleted: string }> {
    return this.request("DELETE", `/v1/sessions/${encodeURIComponent(sessionKey)}`);
  }
  history(
    sessionKey: string,
    query: { limit?: number; before?: number; includeTools?: boolean } = {},
  ): Promise<SessionsHistoryResult> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(sessionKey)}/history${qs(query)}`);
  }
  /** The session and its sub-agents, level by level, with status, run time, tokens and cost. */
  sessionTree(sessionKey: string): Promise<SessionTree> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(sessionKey)}/tree`);
  }
  /** The session's own task ledger: open tasks and those updated within `recentMinutes` (docs/tasks.md). */
  listTasks(
    sessionKey: string,
    query: { recentMinutes?: number; limit?: number } = {},
  ): Promise<{ sessionKey: string; tasks: TaskRecord[] }> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(sessionKey)}/tasks${qs(query)}`);
  }
  /** What looks wrong in the session's ledger: stale, lost and undelivered tasks. */
  auditTasks(sessionKey: string): Promise<TaskAudit> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(sessionKey)}/tasks/audit`);
  }
  getTask(taskId: string): Promise<TaskRecord> {
    return this.request("GET", `/v1/tasks/${encodeURIComponent(taskId)}`);
  }
  /** Cancel a task and every task below it (the same cascade as the `subagents` tool's `cancel`). */
  cancelTask(taskId: string): Promise<{ taskId: string; found: true; cancelled: boolean; reason?: string }> {
    return this.request("POST", `/v1/tasks/${encodeURIComponent(taskId)}/cancel`);
  }
  getRun(runId: string): Promise<RunSnapshot> {
    return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}`);
  }
  /** Server-side wait; returns the run as it is when `timeoutMs` passes (call again to keep waiting). */
  waitRun(runId: string, timeoutMs = 30_000): Promise<RunSnapshot> {
    return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}/wait${qs({ timeoutMs })}`);
  }
  abortRun(runId: string): Promise<RunSnapshot> {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/abort`);
  }
  /** Webhook runtimes: complete an accepted (202) run. The client's token must be that run's token. */
  completeRun(runId: string, completion: RunCompletion): Promise<RunSnapshot> {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/complete`, completion);
  }
  /**
   * Webhook runtimes: keep an accepted (202) run without a deadline alive — at least every `leaseMs` of the run
   * POST — and take the fresh `runToken` it answers for the calls that follow (docs/webhooks.md).
   */
  heartbeatRun(runId: string): Promise<RunHeartbeat> {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/heartbeat`);
  }
  agents(): Promise<AgentsInfo> {
    return this.request("GET", "/v1/agents");
  }

  // ------------------------------------------------------------ event streams (docs/events.md)

  /**
   * A session's events as they happen — `message`, `run`, `delivery` (and `gap`, `reset`, `end`) — resumed
   * with `Last-Event-ID` after a dropped connection; ends with `end` (the session was deleted or archived).
   *
   *   for await (const e of sb.watchSession("main")) if (e.event === "message") console.log(e.data);
   */
  watchSession(sessionKey: string, opts: WatchOptions = {}): AsyncGenerator<StreamEvent> {
    return watchEvents(
      (id, signal) => this.stream(`/v1/sessions/${encodeURIComponent(sessionKey)}/events`, id, signal),
      opts,
    );
  }

  /** A run's text as it is generated (`delta`, `tool-call`), ending with its final `status` (or `end`). */
  watchRun(runId: string, opts: WatchOptions = {}): AsyncGenerator<StreamEvent> {
    return watchEvents((id, signal) => this.stream(`/v1/runs/${encodeURIComponent(runId)}/events`, id, signal), opts);
  }

  private stream(path: string, lastEventId: string | undefined, signal: AbortSignal | undefined): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.opts.token}`, Accept: "text/event-stream" };
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    return this.doFetch(`${this.baseUrl}${path}`, { headers, signal });
  }

  // ------------------------------------------------------------ transport

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.opts.token}`, Accept: "application/json" };
    if (this.opts.sessionKey) headers["X-Session-Key"] = this.opts.sessionKey;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await this.doFetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const err = (json as { error?: { type?: string; message?: string } } | undefined)?.error;
      throw new SwitchboardApiError(res.status, err?.type ?? "http_error", err?.message ?? `HTTP ${res.status}`);
    }
    return json as T;
  }
}

function qs(query: Record<string, string | number | boolean | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : "";
}

/** A tool refusal (`{status: "forbidden" | "error", error}`): a result, not an exception. */
export function isRefusal(v: unknown): v is Refusal {
  const s = (v as { status?: unknown } | null)?.status;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as { error?: unknown }).error === "string" &&
    (s === "forbidden" || s === "error")
  );
}

/** Tool descriptors → OpenAI function tools. */
export function toOpenAITools(tools: ToolDescriptor[]): OpenAIFunctionTool[] {
  return tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
}

/** Tool descriptors → AI SDK-style tool map (`{ [name]: { description, inputSchema, execute } }`). */
export function toAiSdkTools(
  tools: ToolDescriptor[],
  invoke: (name: string, args: Record<string, unknown>) => Promise<unknown>,
): Record<string, AiSdkToolDefinition> {
  const out: Record<string, AiSdkToolDefinition> = {};
  for (const t of tools)
    out[t.name] = { description: t.description, inputSchema: t.parameters, execute: (args) => invoke(t.name, args) };
  return out;
}

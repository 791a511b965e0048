import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import {
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import type { AgentConfig } from "../config/agents-schema";
import type { Config } from "../config/schema";
import { fromRpcError, SwitchboardError } from "../errors";
import { mintedOwner } from "../http/handle-owner";
import { keyContextOf, parseSessionKey } from "../keys";
import { checkTextSize } from "../session/byte-budget";
import type { RunSnapshot } from "../session/run-schema";
import { FINAL_STATUSES } from "../session/types";
import { abortRunHandle } from "../tasks/run-abort";
import { agentCard } from "./card";
import {
  checkedPushConfig,
  deletePushConfig,
  getPushConfig,
  listPushConfigs,
  SEND_CONFIG_ID,
  setPushConfig,
} from "./push-methods";
import { runUpdates } from "./stream";
import { taskOfRun } from "./tasks";

/** A blocking `SendMessage` waits this long for the run to end, then answers the task as it is (docs/limits.md). */
export const A2A_BLOCKING_WAIT_MS = 60_000;
/** A context id is a session key's rest (docs/protocols.md): at most this long (MAX_KEY_LENGTH less `agent:<id>:`). */
export const A2A_MAX_CONTEXT_ID = 256;

export interface A2ACall {
  env: Env;
  cfg: Config;
  agent: AgentConfig;
  origin: string;
  /** Whose idempotency keys a message id is (src/http/principal.ts). */
  idempotencyScope: string;
  /** `Last-Event-ID` of the HTTP request: where a `SubscribeToTask` stream resumes. */
  lastEventId: string | null;
}

/** Our errors as A2A's: bad input is a malformed request, anything else keeps its message. */
function asA2AError(err: unknown): unknown {
  const e = fromRpcError(err);
  if (e instanceof SwitchboardError && (e.type === "invalid_request" || e.type === "payload_too_large"))
    return new RequestMalformedError(e.message);
  return e;
}

/**
 * The A2A methods of one agent (docs/protocols.md, "A2A"), served by the SDK's JSON-RPC transport
 * (src/http/routes/a2a.ts). Nothing here is kept in memory between requests: a task is a run, read from its session
 * object each time, so an eviction or another Worker instance changes nothing.
 */
export class SwitchboardA2AHandler implements A2ARequestHandler {
  constructor(private readonly call: A2ACall) {}

  async getAgentCard(): Promise<AgentCard> {
    return agentCard(this.call.origin, this.call.agent);
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new UnsupportedOperationError("This agent has no extended agent card");
  }

  /**
   * The session a context id names: `agent:<agentId>:<contextId>`. It cannot leave this agent: a key starting
   * `agent:<id>:` is that agent's whatever follows (src/keys.ts), so only the key grammar can refuse it.
   */
  private sessionOfContext(contextId: string): string {
    if (contextId.length > A2A_MAX_CONTEXT_ID)
      throw new RequestMalformedError(`contextId: at most ${A2A_MAX_CONTEXT_ID} characters`);
    const agentId = this.call.agent.id;
    try {
      return parseSessionKey(`agent:${agentId}:${contextId}`, keyContextOf(this.call.cfg, agentId)).canonicalKey;
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new RequestMalformedError(`contextId ${JSON.stringify(contextId.slice(0, 80))} is not usable: ${why}`);
    }
  }

  /** The run of a task id, only within this agent: an id of another agent's session is not found here. */
  private async runOf(id: string): Promise<RunSnapshot> {
    // The same id check as every other surface (src/http/handle-owner.ts): a forged id wakes no object. The scope
    // is this agent's sessions; the caller's token was checked against the agent already (src/http/a2a-access.ts).
    const key = mintedOwner(this.call.cfg, id)?.canonicalKey;
    if (!key?.startsWith(`agent:${this.call.agent.id}:`)) throw new TaskNotFoundError(`Task not found: ${id}`);
    const run = await this.call.env.SESSIONS.getByName(key).getRun(id);
    if (!run) throw new TaskNotFoundError(`Task not found: ${id}`);
    return run;
  }

  /**
   * Queue the message as a run of the context's session; the same message id from the same token is the same run.
   * A push config in the request is checked before the run exists and set on it right after: it then gets every
   * state from `working` on (a run that started or ended in between is notified at once: src/a2a/push.ts).
   */
  private async start(params: SendMessageRequest): Promise<RunSnapshot> {
    const push = params.configuration?.taskPushNotificationConfig;
    const checked = push ? checkedPushConfig("", push, SEND_CONFIG_ID) : null;
    const run = await this.enqueue(params);
    if (checked) await setPushConfig(this.call.env, run, { ...checked, runId: run.runId });
    return run;
  }

  private async enqueue(params: SendMessageRequest): Promise<RunSnapshot> {
    const message = params.message;
    if (!message) throw new RequestMalformedError("message is required");
    if (!message.messageId) throw new RequestMalformedError("message.messageId is required");
    if (message.messageId.length > 200) throw new RequestMalformedError("message.messageId: at most 200 characters");
    // Each message is a new turn, hence a new task; a task's own input is never asked for (no input-required).
    if (message.taskId)
      throw new UnsupportedOperationError(
        "Each message starts a new task: continue the conversation with its contextId, not a taskId",
      );
    const texts: string[] = [];
    for (const part of message.parts) {
      if (part.content?.$case === "text") texts.push(part.content.value);
      else if (part.content?.$case === "data") texts.push(JSON.stringify(part.content.value));
      else throw new RequestMalformedError("Only text and data parts are accepted (no files: docs/limits.md)");
    }
    const text = texts.join("\n");
    if (!text.trim()) throw new RequestMalformedError("message: no text");
    const contextId = message.contextId || `a2a:${crypto.randomUUID()}`;
    const key = this.sessionOfContext(contextId);
    try {
      checkTextSize("message", text, this.call.cfg.limits.maxMessageBytes);
      return await this.call.env.SESSIONS.getByName(key).enqueue({
        input: { kind: "inbound", message: text, provenance: { kind: "external_user" }, deliver: false },
        // Per principal, like REST's idempotencyKey (src/http/routes/sessions.ts): a retried send is the same task.
        idempotencyKey: `a2a:${this.call.idempotencyScope}:${message.messageId}`,
      });
    } catch (err) {
      throw asA2AError(err);
    }
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const run = await this.start(params);
    const agentId = this.call.agent.id;
    if (params.configuration?.returnImmediately) return taskOfRun(agentId, run);
    let now: RunSnapshot | null;
    try {
      now = await this.call.env.SESSIONS.getByName(run.sessionKey).waitRun(run.runId, A2A_BLOCKING_WAIT_MS);
    } catch {
      // The object restarted during the wait: the run is durable, answer it as it is now (like runs.ts's wait).
      now = await this.call.env.SESSIONS.getByName(run.sessionKey).getRun(run.runId);
    }
    return taskOfRun(agentId, now ?? run);
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse> {
    const run = await this.start(params);
    yield { payload: { $case: "task", value: taskOfRun(this.call.agent.id, run) } };
    yield* runUpdates(this.call.env, this.call.agent.id, run, null);
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return taskOfRun(this.call.agent.id, await this.runOf(params.id));
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    const run = await this.runOf(params.id);
    if (FINAL_STATUSES.has(run.status))
      throw new TaskNotCancelableError(`Task ${params.id} already ended (${run.status})`);
    // The same abort as POST /v1/runs/{id}/abort (src/tasks/run-abort.ts): ends the run once, whichever surface
    // asked first, and a sub-agent's task run (its id is one of this agent's runs too) with its descendants.
    const after = (await abortRunHandle(this.call.env, run.sessionKey, params.id)).run;
    return taskOfRun(this.call.agent.id, after ?? run);
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse> {
    const run = await this.runOf(params.id);
    if (FINAL_STATUSES.has(run.status))
      throw new UnsupportedOperationError(`Task ${params.id} already ended (${run.status}): use GetTask`);
    yield { payload: { $case: "task", value: taskOfRun(this.call.agent.id, run) } };
    yield* runUpdates(this.call.env, this.call.agent.id, run, this.call.lastEventId);
  }

  async listTasks(): Promise<ListTasksResponse> {
    throw new UnsupportedOperationError(
      "ListTasks is not served: list a session's runs with GET /v1/sessions/{key}/runs",
    );
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    const run = await this.runOf(params.taskId);
    return setPushConfig(this.call.env, run, checkedPushConfig(run.runId, params));
  }
  async getTaskPushNotificationConfig(
    params: GetTaskPushNotificationConfigRequest,
  ): Promise<TaskPushNotificationConfig> {
    return getPushConfig(this.call.env, await this.runOf(params.taskId), params.id);
  }
  async listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return listPushConfigs(this.call.env, await this.runOf(params.taskId));
  }
  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    await deletePushConfig(this.call.env, await this.runOf(params.taskId), params.id);
  }
}

import { z } from "zod";
import { signedWebhookHeaders } from "../channels/signed-webhook";
import { agentThinking, findAgent } from "../config/load";
import { invalid } from "../errors";
import { displayKey, parseCanonical, shownProvenance } from "../keys";
import { claimNotifications, notificationsContext } from "../send/send-inbox";
import { DEADLINE_TIMER, LEASE_TIMER } from "../session/core-timers";
import type { SessionExtension } from "../session/extensions";
import { deleteFlowRow, hasFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import {
  HELD_ELSEWHERE,
  RUNTIME_LEASE_MS,
  type RunnerAnswer,
  type RunOutcome,
  type RunRow,
} from "../session/run-types";
import type { RunInput, RunSnapshot } from "../session/types";
import { timeouts } from "../timeout-signal";
import { issueText } from "../zod-issue-text";
import { readBoundedText } from "./bounded-response";
import type { RunnerResult } from "./model-runner";
import { mintRunToken } from "./run-token";
import { isAllowedRuntimeUrl, RUNTIME_URL_RULE } from "./runtime-url";
import { toUsage } from "./step-messages";
import { parseThinkingLevel, type ThinkingLevel } from "./thinking";

/**
 * Webhook agent runtimes (docs/webhooks.md): an agent with `runtime: {type: "webhook", url, secret}` lives
 * outside the Worker. Each run is POSTed to its URL, signed like outbound webhooks, with a run token.
 *
 *  - 200 `{reply}` (or `{error}`): the run completes synchronously with that body.
 *  - 202: the runtime accepted the run and completes it later with `POST /v1/runs/{id}/complete`
 *    (same body), authenticated by the run token. Until then the run stays `running`: its deadline timer
 *    still ends it `timeout`; a run without a deadline is held on a lease the runtime renews with
 *    `POST /v1/runs/{id}/heartbeat` (which also re-issues its token), else it ends `lost` (docs/webhooks.md).
 *
 * Everything else about a run (queue, deadline, waits, ping-pong, announces) is the session object's
 * and therefore identical for built-in and webhook agents.
 */

type WebhookRuntime = { type: "webhook"; url: string; secret?: string };

/** Longest a runtime may hold the run's POST before answering (docs/limits.md); long work answers 202. */
export const MAX_SYNC_REPLY_MS = 15 * 60_000;
/** Bytes of a runtime's synchronous answer read at most (docs/limits.md): room for the largest reply, JSON-escaped. */
export const MAX_RUNTIME_RESPONSE_BYTES = 4 * 1024 * 1024;

/** Flow row marking a run accepted (202) by its runtime: its executor lives outside this object. */
const AWAITING_KIND = "webhook_run";
const awaitingId = (runId: string) => `${AWAITING_KIND}:${runId}`;

/** Body of a synchronous reply and of `POST /v1/runs/{id}/complete`. */
export const runCompletionSchema = z
  .object({
    // Never refused for its size once the work is done: a reply over limits.maxMessageBytes is stored truncated with a marker.
    reply: z
      .string()
      .optional()
      .describe(
        "The assistant's reply (may be empty; over limits.maxMessageBytes it is kept truncated with a marker). Send either reply or error.",
      ),
    error: z.string().min(1).max(10_000).optional().describe("Why the run failed. Send either reply or error."),
    usage: z
      .object({ input: z.number().int().min(0).optional(), output: z.number().int().min(0).optional() })
      .optional()
      .describe("Tokens the runtime spent, recorded in the session's totals."),
    model: z.string().max(256).optional().describe("Model the runtime used, for the transcript."),
  })
  .refine((c) => (c.reply !== undefined) !== (c.error !== undefined), "send exactly one of reply or error")
  // The refinement above, as /openapi.json states it (JSON Schema's "exactly one of these fields present").
  .meta({ oneOf: [{ required: ["reply"] }, { required: ["error"] }] });
export type RunCompletion = z.infer<typeof runCompletionSchema>;

/** What a runtime receives for each run (the POST body). */
export interface WebhookRunRequest {
  type: "switchboard.run";
  runId: string;
  attempt: number;
  sessionKey: string;
  sessionId: string;
  agentId: string;
  isSubagent: boolean;
  kind: RunInput["kind"];
  message: string;
  provenance?: RunInput["provenance"];
  /** The session's model (PATCH model, sessions_spawn model, else the agent's configured model), when one is set. */
  model?: string;
  /** The session's thinking level (off|minimal|low|medium|high|xhigh), when one is set. */
  thinking?: ThinkingLevel;
  /** Agent-to-agent or sub-agent context for this run only: add it to the system prompt. */
  extraSystemPrompt?: string;
  /** Bearer token acting as this run's session until the run ends or `deadline` passes. */
  runToken: string;
  /** ms since epoch: the run ends `timeout` if not completed by then; null: the run has no deadline. */
  deadline: number | null;
  /**
   * After a 202, a run without a deadline ends `lost` unless the runtime completes it or heartbeats within
   * this many ms of the 202 and of each heartbeat (renew at half of it).
   */
  leaseMs: number;
  /** Where to send an async completion, relative to the gateway's base URL. */
  completePath: string;
  /** Where to renew the lease and get a fresh run token (`POST`, with the run token). */
  heartbeatPath: string;
}

export function parseRunCompletion(raw: unknown): RunCompletion & ({ reply: string } | { error: string }) {
  const r = runCompletionSchema.safeParse(raw);
  if (!r.success) {
    throw invalid(issueText(r.error.issues[0], "body"));
  }
  return r.data as RunCompletion & ({ reply: string } | { error: string });
}

/** The run outcome a completion stands for, with the transcript row of the reply. */
export function outcomeOf(c: RunCompletion, agentId: string): RunOutcome {
  if (c.error !== undefined) return { status: "error", error: c.error };
  const reply = c.reply ?? "";
  const usage = toUsage({ inputTokens: c.usage?.input, outputTokens: c.usage?.output });
  const model = c.model ?? agentId;
  const result: RunnerResult = {
    messages: [
      {
        role: "assistant",
        content: reply ? [{ type: "text", text: reply }] : [],
        api: "webhook",
        provider: "webhook",
        model,
        usage,
        stopReason: "stop",
        timestamp: Date.now(),
      },
    ],
    reply,
    usage,
    model,
    provider: "webhook",
  };
  return { status: "ok", reply, result };
}

async function runOnWebhook(
  host: SessionHost,
  run: RunRow,
  input: RunInput,
  signal: AbortSignal,
  runtime: WebhookRuntime,
): Promise<RunnerAnswer> {
  // Checked again here (the config refuses it too): a run token never goes over plain http to another host.
  if (!isAllowedRuntimeUrl(runtime.url)) throw new Error(`webhook runtime URL refused: ${RUNTIME_URL_RULE}`);
  const secret = host.bindings.SIGNING_SECRET;
  if (typeof secret !== "string" || !secret)
    throw new Error("SIGNING_SECRET is not set: webhook runtimes need it to mint run tokens");
  const meta = host.meta!;
  const cfg = host.cfg;
  // The run's own deadline, or none: the token must live as long as the run (a sub-agent task with
  // runTimeoutSeconds 0 runs for as long as it takes), so it never borrows a deadline the run does not have.
  const deadline = host.timers.get(DEADLINE_TIMER, run.id)?.due_at ?? null;
  const isSubagent = parseCanonical(meta.key, cfg).isSubagent;
  const agent = findAgent(cfg, meta.agentId);
  const model = meta.modelOverride ?? agent?.model;
  const thinking = parseThinkingLevel(meta.thinkingLevel ?? agentThinking(cfg, meta.agentId));
  const runToken = await mintRunToken(secret, {
    runId: run.id,
    sessionKey: meta.key,
    agentId: meta.agentId,
    isSubagent,
    expiresAt: deadline,
  });
  // The session's notifications (sessions_send mode=notify) are this turn's context, as for the model runner.
  const extraSystemPrompt =
    [input.extraSystemPrompt, notificationsContext(claimNotifications(host, run.id), displayKey)]
      .filter(Boolean)
      .join("\n\n") || undefined;
  const request: WebhookRunRequest = {
    type: "switchboard.run",
    runId: run.id,
    attempt: run.attempts,
    sessionKey: displayKey(meta.key),
    sessionId: meta.sessionId,
    agentId: meta.agentId,
    isSubagent,
    kind: input.kind,
    message: input.message,
    ...(input.provenance ? { provenance: shownProvenance(input.provenance) } : {}),
    ...(model ? { model } : {}),
    ...(thinking ? { thinking } : {}),
    ...(extraSystemPrompt ? { extraSystemPrompt } : {}),
    runToken,
    deadline,
    leaseMs: RUNTIME_LEASE_MS,
    completePath: `/v1/runs/${run.id}/complete`,
    heartbeatPath: `/v1/runs/${run.id}/heartbeat`,
  };
  const body = JSON.stringify(request);
  // The run id is stable across a retried attempt, so a runtime can recognise a repeat (webhook-id).
  const headers = await signedWebhookHeaders({ id: run.id, rawBody: body, secret: runtime.secret, nowMs: Date.now() });

  // Bounded even for a run without a deadline: a synchronous answer that takes longer should be a 202.
  const waitMs = Math.max(1, Math.min((deadline ?? Number.POSITIVE_INFINITY) - Date.now(), MAX_SYNC_REPLY_MS));
  const timeout = timeouts.signal(waitMs, signal);
  try {
    let res: Response;
    try {
      // A 3xx is a failure, never followed: the signed run (and its run token) must not go where a redirect points.
      res = await fetch(runtime.url, {
        method: "POST",
        headers,
        body,
        signal: timeout.signal,
        redirect: "manual",
      });
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof Error && err.name === "TimeoutError")
        throw new Error(
          `webhook runtime did not answer within ${waitMs}ms (answer 202 and complete later for long runs)`,
        );
      throw new Error(`webhook runtime unreachable: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (res.status === 202) {
      void res.body?.cancel();
      // Nothing waits for it in memory: its completion (it may already have arrived, before this 202),
      // its deadline or its lease ends it through finishRun.
      markAwaiting(host, run.id);
      return HELD_ELSEWHERE;
    }
    if (!res.ok) {
      void res.body?.cancel();
      throw new Error(
        `webhook runtime answered HTTP ${res.status}${res.status >= 300 && res.status < 400 ? " (redirects are not followed)" : ""}`,
      );
    }
    const text = await readBoundedText(res, MAX_RUNTIME_RESPONSE_BYTES);
    if (text === null) throw new Error(`webhook runtime answered more than ${MAX_RUNTIME_RESPONSE_BYTES} bytes`);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new Error(
        "webhook runtime answered 200 without a JSON body: expected {reply} or {error}, or 202 to complete later",
      );
    }
    let completion: RunCompletion;
    try {
      completion = parseRunCompletion(json);
    } catch (err) {
      throw new Error(`webhook runtime answered an invalid body: ${err instanceof Error ? err.message : String(err)}`);
    }
    const outcome = outcomeOf(completion, meta.agentId);
    if (outcome.status === "error") throw new Error(outcome.error);
    return outcome.result!;
  } finally {
    timeout.clear();
  }
}

/**
 * Durably mark the run as held by its runtime (only while it is still running: a fast /complete may have
 * ended it). Without a deadline, the run's lease becomes the runtime's to renew (src/session/run-queue.ts).
 */
function markAwaiting(host: SessionHost, runId: string): void {
  host.storage.transactionSync(() => {
    if (host.runRow(runId)?.status !== "running") return;
    putFlowRow(host.sql, { id: awaitingId(runId), kind: AWAITING_KIND, state: "awaiting", data: {} }, "ignore");
    if (!host.timers.get(DEADLINE_TIMER, runId)) host.timers.set(LEASE_TIMER, runId, Date.now() + RUNTIME_LEASE_MS);
  });
}

/** What a heartbeat answers: the run, its deadline (null: none) and until when its lease now runs (null: no lease to renew). */
export interface RuntimeHeartbeat {
  run: RunSnapshot | null;
  deadline: number | null;
  leaseExpiresAt: number | null;
}

/**
 * The runtime holding a run renews its lease (`POST /v1/runs/{id}/heartbeat`). Only a run the runtime holds
 * (it answered 202) and that has no deadline has a lease to renew; any running run may heartbeat, to get a
 * fresh token. The caller has verified the run token.
 */
function heartbeat(host: SessionHost, runId: string): RuntimeHeartbeat {
  if (!host.hasStorage) return { run: null, deadline: null, leaseExpiresAt: null };
  return host.storage.transactionSync(() => {
    const row = host.runRow(runId);
    const deadline = host.timers.get(DEADLINE_TIMER, runId)?.due_at ?? null;
    let leaseExpiresAt: number | null = null;
    if (row?.status === "running" && deadline === null && hasFlowRow(host.sql, awaitingId(runId))) {
      leaseExpiresAt = Date.now() + RUNTIME_LEASE_MS;
      host.timers.set(LEASE_TIMER, runId, leaseExpiresAt);
    }
    return { run: row ? host.snapshot(row) : null, deadline, leaseExpiresAt };
  });
}

const webhookRpc = {
  heartbeat: async (host: SessionHost, runId: string) => {
    const beat = heartbeat(host, String(runId));
    await host.timers.arm();
    return beat;
  },
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "webhook-runtime": typeof webhookRpc;
  }
}

/** Complete a run from its runtime (`POST /v1/runs/{id}/complete`); the caller has verified the run token. */
export async function completeRun(
  env: Env,
  sessionKey: string,
  runId: string,
  completion: RunCompletion,
  agentId: string,
): Promise<RunSnapshot | null> {
  const stub = env.SESSIONS.getByName(sessionKey);
  await stub.finishRun(runId, outcomeOf(completion, agentId));
  return stub.getRun(runId);
}

/** Agents whose runtime is a webhook: the run is POSTed there and completed through the API (docs/webhooks.md). */
export const webhookRunnerExtension: SessionExtension = {
  name: "webhook-runtime",
  rpc: webhookRpc,
  produceReply(host, run, input, signal) {
    // Owner commands (`/send on|off`) are the gateway's own runs, answered by their extension, not by the agent.
    if (input.kind === "command") return undefined;
    const runtime = findAgent(host.cfg, host.meta!.agentId)?.runtime;
    if (runtime?.type !== "webhook") return undefined;
    return runOnWebhook(host, run, input, signal, runtime);
  },
  holdsRun(host, runId) {
    return hasFlowRow(host.sql, awaitingId(runId));
  },
  onRunEnded(host, event) {
    deleteFlowRow(host.sql, awaitingId(event.run.runId));
  },
};

import { z } from "zod";
import { signedWebhookHeaders } from "../channels/signed-webhook";
import { agentThinking, findAgent } from "../config/load";
import { invalid } from "../errors";
import { displayKey, parseCanonical, shownProvenance } from "../keys";
import { DEADLINE_TIMER } from "../session/core-timers";
import type { SessionExtension } from "../session/extensions";
import { deleteFlowRow, hasFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import type { RunOutcome, RunRow } from "../session/run-types";
import type { RunInput, RunSnapshot } from "../session/types";
import { issueText } from "../zod-issue-text";
import { readBoundedText } from "./bounded-response";
import type { RunnerResult } from "./model-runner";
import { mintRunToken } from "./run-token";
import { toUsage } from "./step-messages";
import { parseThinkingLevel, type ThinkingLevel } from "./thinking";

/**
 * Webhook agent runtimes (docs/webhooks.md): an agent with `runtime: {type: "webhook", url, secret}` lives
 * outside the Worker. Each run is POSTed to its URL, signed like outbound webhooks, with a run token.
 *
 *  - 200 `{reply}` (or `{error}`): the run completes synchronously with that body.
 *  - 202: the runtime accepted the run and completes it later with `POST /v1/runs/{id}/complete`
 *    (same body), authenticated by the run token. Until then the run stays `running` and its deadline
 *    timer still ends it `timeout`.
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
  .refine((c) => (c.reply !== undefined) !== (c.error !== undefined), "send exactly one of reply or error");
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
  /** ms since epoch: the run ends `timeout` if not completed by then. */
  deadline: number;
  /** Where to send an async completion, relative to the gateway's base URL. */
  completePath: string;
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

/**
 * In-memory release of a `produceReply` that waits for an async completion. Memory only on purpose:
 * if this instance is evicted the completion ends the run through `finishRun` on the next instance,
 * and nothing waits in memory any more.
 */
const runEnded = new WeakMap<SessionHost, Map<string, (run: RunSnapshot) => void>>();

/** Keyed by object instance: an evicted instance's waiter must never be woken by its successor. */
function waitersOf(host: SessionHost): Map<string, (run: RunSnapshot) => void> {
  let m = runEnded.get(host);
  if (!m) {
    m = new Map();
    runEnded.set(host, m);
  }
  return m;
}

function waitForRunEnd(host: SessionHost, runId: string, signal: AbortSignal): Promise<RunSnapshot> {
  const waiters = waitersOf(host);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      waiters.delete(runId);
      reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    waiters.set(runId, (run) => {
      signal.removeEventListener("abort", onAbort);
      waiters.delete(runId);
      resolve(run);
    });
  });
}

async function runOnWebhook(
  host: SessionHost,
  run: RunRow,
  input: RunInput,
  signal: AbortSignal,
  runtime: WebhookRuntime,
): Promise<RunnerResult> {
  const secret = host.bindings.SIGNING_SECRET;
  if (typeof secret !== "string" || !secret)
    throw new Error("SIGNING_SECRET is not set: webhook runtimes need it to mint run tokens");
  const meta = host.meta!;
  const cfg = host.cfg;
  // A run without a deadline (timeoutSeconds 0, a sub-agent without runTimeoutSeconds) still gets a token
  // that ends: OpenClaw's default run budget, 48 h.
  const deadline =
    host.timers.get(DEADLINE_TIMER, run.id)?.due_at ??
    Date.now() + (cfg.agents.defaults.timeoutSeconds || 172_800) * 1000;
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
    ...(input.extraSystemPrompt ? { extraSystemPrompt: input.extraSystemPrompt } : {}),
    runToken,
    deadline,
    completePath: `/v1/runs/${run.id}/complete`,
  };
  const body = JSON.stringify(request);
  // The run id is stable across a retried attempt, so a runtime can recognise a repeat (webhook-id).
  const headers = await signedWebhookHeaders({ id: run.id, rawBody: body, secret: runtime.secret, nowMs: Date.now() });

  // Registered before the POST: a runtime may call /complete before its 202 reaches us.
  const ended = waitForRunEnd(host, run.id, signal);
  ended.catch(() => {}); // observed below only on the async path
  let accepted = false;
  try {
    let res: Response;
    // Bounded even for a run without a deadline: a synchronous answer that takes longer should be a 202.
    const waitMs = Math.max(1, Math.min(deadline - Date.now(), MAX_SYNC_REPLY_MS));
    try {
      // A 3xx is a failure, never followed: the signed run (and its run token) must not go where a redirect points.
      res = await fetch(runtime.url, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(waitMs)]),
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
      accepted = true;
      void res.body?.cancel();
      markAwaiting(host, run.id);
      await ended;
      // The run was ended by its completion (or deadline/abort) through finishRun; this result is ignored.
      return outcomeOf({ reply: "" }, meta.agentId).result!;
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
    if (!accepted) waitersOf(host).delete(run.id);
  }
}

/** Durably mark the run as held by its runtime (only while it is still running: a fast /complete may have ended it). */
function markAwaiting(host: SessionHost, runId: string): void {
  host.storage.transactionSync(() => {
    if (host.runRow(runId)?.status !== "running") return;
    putFlowRow(host.sql, { id: awaitingId(runId), kind: AWAITING_KIND, state: "awaiting", data: {} }, "ignore");
  });
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
  afterRunEnded(host, event) {
    runEnded.get(host)?.get(event.run.runId)?.(event.run);
  },
};

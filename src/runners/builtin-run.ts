import { runContext } from "../compaction/context";
import { summaryContext } from "../compaction/summarize";
import { agentModel, agentThinking, findAgent } from "../config/load";
import { displayKey } from "../keys";
import { claimNotifications, drainSteers, notificationsContext } from "../send/send-inbox";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunInput, TranscriptMessage } from "../session/types";
import { attachmentParts } from "../spawn/attachment-parts";
import { buildRunTools, type RunTurn } from "../tools/run-tools";
import { yieldedTurnReply } from "../tools/sessions-yield";
import { type RunLiveOutput, type RunnerResult, runModel } from "./model-runner";
import { type ResolvedModel, resolveModel } from "./models";
import { parseThinkingLevel } from "./thinking";

/**
 * A run on the built-in model runner: the session's model (override → agent → defaults), its thinking
 * level (session → agent → defaults), its context — the latest compaction's summary and the messages
 * after it that fit (src/compaction/context.ts, which compacts first when they no longer fit) — the
 * session tools it may use, and — for a sub-agent — its spawn attachments as parts of the task message.
 */
export async function runBuiltinModel(
  host: SessionHost,
  runId: string,
  input: RunInput,
  signal: AbortSignal,
  onStep: (messages: TranscriptMessage[]) => void,
  live: RunLiveOutput,
): Promise<RunnerResult> {
  const cfg = host.cfg;
  const meta = host.meta!;
  const model = resolveModel(cfg, host.bindings, meta.modelOverride ?? agentModel(cfg, meta.agentId), {
    agentId: meta.agentId,
  });
  const agent = findAgent(cfg, meta.agentId);
  const thinking = parseThinkingLevel(meta.thinkingLevel ?? agentThinking(cfg, meta.agentId));
  const context = await runContext(host, { runId, model, thinking, signal });
  const system = [
    agent?.systemPrompt ?? `You are ${agent?.name ?? meta.agentId}, an agent reached through Switchboard.`,
    `Your session: ${displayKey(meta.key)}.`,
    input.extraSystemPrompt,
    context.summary !== undefined ? summaryContext(context.summary) : undefined,
    // Taken by this turn (a retry of it takes the same ones; src/send/send-inbox.ts).
    notificationsContext(claimNotifications(host, runId), displayKey),
  ]
    .filter(Boolean)
    .join("\n\n");
  const turn: RunTurn = { runId, yielded: null };
  const result = await runModel({
    model,
    system,
    history: context.history,
    tools: buildRunTools(host.bindings, meta, turn),
    // A sessions_yield call ended the turn (its claim is already durable): no further step (docs/subagents.md).
    stop: () => turn.yielded !== null,
    signal,
    providerOptions: model.thinkingOptions(thinking),
    ...(meta.subagent ? { taskParts: attachmentParts(host) } : {}),
    onStep,
    live: streams(model, host) ? live : undefined,
    steering: () => drainSteers(host, runId),
  });
  // A yielded turn produces no reply of its own: a user's turn gets the waiting acknowledgment instead.
  return turn.yielded
    ? { ...result, reply: yieldedTurnReply(input.kind, Boolean(meta.subagent), turn.yielded.acknowledgment) }
    : result;
}

/**
 * Whether a run streams (`streamText`) or is asked for in one piece (`generateText`). The AI SDK costs
 * ~30 µs of CPU per streamed chunk (measured in Node: ~10 ms for a 300-token reply against ~0.2 ms in
 * one body; docs/events.md). A remote model (any provider API, Workers AI) answers in seconds of wall
 * time, so that CPU is small beside it, and streaming always lets a watcher who arrives after the send
 * (the usual client: send, get the runId, then open the run's stream) see the text from then on. The
 * offline builtin models answer in microseconds, where streaming would multiply the run's cost for
 * nobody: they stream only when someone watches the session as the run starts; a late watcher of such
 * a run gets its replay once it ended (test/runners/run-stream-providers.test.ts).
 */
function streams(model: ResolvedModel, host: SessionHost): boolean {
  return model.api !== "builtin" || host.isWatched();
}

/**
 * The built-in model runner is one more runner extension beside the webhook runtime and owner commands:
 * it answers every message run of an agent whose runtime is the model (the default). Commands are the
 * send-command extension's (src/policy/send-command.ts).
 *
 * Which runs stream is decided with the model (`streams` above).
 */
export const modelRunnerExtension: SessionExtension = {
  name: "model-runner",
  produceReply(host, run, input, signal) {
    if (input.kind === "command") return undefined;
    const runtime = findAgent(host.cfg, host.meta!.agentId)?.runtime;
    // A session of an agent that is not in the roster runs on the model runner (the default runtime).
    if (runtime && runtime.type !== "model") return undefined;
    const live: RunLiveOutput = {
      onDelta: (text) => host.events.runs.delta(run.id, text),
      onToolCall: (call) => host.events.runs.toolCall(run.id, call),
    };
    return runBuiltinModel(host, run.id, input, signal, (messages) => host.recordStep(run.id, messages), live);
  },
};

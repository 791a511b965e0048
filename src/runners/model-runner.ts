import type { SharedV4ProviderOptions } from "@ai-sdk/provider";
import { generateText, isStepCount, type ModelMessage, type StepResult, streamText, type ToolSet } from "ai";
import type { RunnerResult } from "../session/run-types";
import type { ContentBlock, TranscriptMessage } from "../session/types";
import type { AttachmentPart } from "../spawn/attachment-parts";
import type { ResolvedModel } from "./models";
import { stepMessages, toUsage } from "./step-messages";

/**
 * The built-in runner: one run = one `streamText` call when it is given `live` (every remote model; the
 * builtin one when watched: src/runners/builtin-run.ts), else one `generateText` call — with up to 8 tool
 * steps when the session may use the session tools. It never writes storage: each finished step's
 * transcript rows go to `onStep` (the session object records them at once, so a run cut short by its
 * deadline keeps the work it did and a long run shows progress), so its result carries no messages of
 * its own.
 */
export type { RunnerResult };

export interface ModelRunRequest {
  model: ResolvedModel;
  system: string;
  history: TranscriptMessage[];
  tools?: ToolSet;
  signal: AbortSignal;
  /** Per-call provider options (the thinking level, src/runners/thinking.ts). */
  providerOptions?: SharedV4ProviderOptions;
  /** Extra content parts of a sub-agent's task message (its spawn attachments). */
  taskParts?: AttachmentPart[];
  /** Called with each step's messages as soon as the step finishes. */
  onStep: (messages: TranscriptMessage[]) => void;
  /** Checked after each step: true ends the run there (a sessions_yield claimed the turn; src/tools/run-tools.ts). */
  stop?: () => boolean;
  /** Watchers of the run's text (src/events/session-events.ts): given, the run streams (which do: src/runners/builtin-run.ts). */
  live?: RunLiveOutput;
  /**
   * Messages to add before each model step (sessions_send mode=steer, src/send/send-inbox.ts): called at
   * every step boundary; what it returns joins this step's input and every later step's.
   */
  steering?: () => TranscriptMessage[];
}

/** Where a streamed run's text and tool calls go as the model produces them (GET /v1/runs/{runId}/events). */
export interface RunLiveOutput {
  onDelta(text: string): void;
  onToolCall(call: { toolCallId: string; toolName: string; args: unknown }): void;
}

export async function runModel(req: ModelRunRequest): Promise<RunnerResult> {
  const hasTools = req.tools && Object.keys(req.tools).length > 0;
  const options = {
    model: req.model.model,
    instructions: req.system,
    messages: toModelMessages(req.history, req.taskParts),
    tools: hasTools ? req.tools : undefined,
    ...(req.providerOptions ? { providerOptions: req.providerOptions } : {}),
    stopWhen: req.stop ? [isStepCount(hasTools ? 8 : 1), () => req.stop!()] : isStepCount(hasTools ? 8 : 1),
    abortSignal: req.signal,
    maxRetries: 1,
    onStepEnd: (step: StepResult<ToolSet>) => req.onStep(stepMessages(req.model, step)),
    // The step boundary (before each model call, after the previous step's tools ran and its rows were
    // recorded): steers taken now are appended to this step's messages, which the SDK carries to later steps.
    prepareStep: ({ messages }: { messages: ModelMessage[] }) => {
      const steers = req.steering?.() ?? [];
      return steers.length > 0 ? { messages: [...messages, ...toModelMessages(steers)] } : undefined;
    },
    // No telemetry integration is registered here, but the SDK still traces every call, step and tool through
    // node:diagnostics_channel unless told not to: it skips only when `hasSubscribers === false`, and
    // workerd's is a method, never `false` (~3% of a send burst's CPU; test/runners/model-runner-telemetry.test.ts).
    telemetry: { isEnabled: false },
  };
  const result = req.live ? await streamModel(options, req.live) : await generateText(options);
  const usage = toUsage(result.usage, req.model.cost);
  return { messages: [], reply: result.text, usage, model: req.model.modelId, provider: req.model.provider };
}

/**
 * `streamText` on any provider (each API's streaming wire format; test/runners/run-stream-providers.test.ts),
 * forwarding each text delta and tool call to the run's watchers as it arrives. The reply, usage, steps,
 * retries and errors are those `generateText` gives.
 */
async function streamModel(
  options: Parameters<typeof streamText>[0],
  live: RunLiveOutput,
): Promise<{ text: string; usage: { inputTokens?: number; outputTokens?: number; totalTokens?: number } }> {
  // The SDK's default `onError` prints the raw error to the console: an unstructured line that can carry
  // a provider's echo of the API key (test/log-secrets.test.ts). The error reaches the run through the
  // stream below instead, and is logged with the run's end, redacted (src/log.ts).
  const result = streamText({ ...options, onError: () => {} });
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") live.onDelta(part.text);
    else if (part.type === "tool-call")
      live.onToolCall({ toolCallId: part.toolCallId, toolName: part.toolName, args: part.input });
    // The run ends with the first error's message, the one generateText would throw.
    else if (part.type === "error") throw part.error;
  }
  // An abort or the deadline rejects these with the signal's reason; the run has already ended then.
  return { text: await result.text, usage: await result.usage };
}

/**
 * Transcript → model messages. Inter-session input is marked at replay time so the model can tell it
 * from user input. `taskParts` join the sub-agent's task message (the one sessions_spawn queued).
 */
export function toModelMessages(history: TranscriptMessage[], taskParts?: AttachmentPart[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  let partsPlaced = !taskParts || taskParts.length === 0;
  for (const m of history) {
    if (m.role === "user") {
      let text = typeof m.content === "string" ? m.content : textOf(m.content);
      if (m.provenance?.kind === "inter_session") {
        text = `[Inter-session message] sourceSession=${m.provenance.sourceSessionKey ?? "unknown"} sourceChannel=${m.provenance.sourceChannel ?? "unknown"} sourceTool=${m.provenance.sourceTool ?? "unknown"}\n${text}`;
      }
      // The task message itself (inter_session), not a grandchild's announce (internal_system, same tool).
      if (!partsPlaced && m.provenance?.kind === "inter_session" && m.provenance.sourceTool === "sessions_spawn") {
        partsPlaced = true;
        out.push({ role: "user", content: [{ type: "text", text }, ...taskParts!] });
      } else out.push({ role: "user", content: text });
    } else if (m.role === "assistant") {
      const text = textOf(m.content);
      if (text) out.push({ role: "assistant", content: text });
    }
  }
  return out;
}

export function textOf(content: ContentBlock[] | string): string {
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text : "")).join("");
}

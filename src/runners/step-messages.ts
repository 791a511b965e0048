import { getErrorMessage } from "@ai-sdk/provider";
import type { StepResult, ToolSet } from "ai";
import type { ContentBlock, TranscriptMessage, Usage } from "../session/types";
import { REDACTED_CONTENT, redactAttachmentArgs } from "../spawn/attachments";
import type { ResolvedModel } from "./models";

/**
 * One step's transcript rows: the assistant message (with that call's usage), then one tool result per
 * tool call, in call order. A call the AI SDK rejected (input its schema refuses, a tool the run does not
 * have) gets a result too — `isError: true`, with the error text the model was told — so no call in the
 * transcript is left without its result (test/runners/rejected-tool-call.test.ts).
 */
export function stepMessages(model: ResolvedModel, step: StepResult<ToolSet>): TranscriptMessage[] {
  const now = Date.now();
  const content: ContentBlock[] = [];
  if (step.text) content.push({ type: "text", text: step.text });
  for (const call of step.toolCalls) {
    content.push({
      type: "toolCall",
      id: call.toolCallId,
      name: call.toolName,
      arguments: transcriptInput(call.toolName, call.input),
    });
  }
  const messages: TranscriptMessage[] = [
    {
      role: "assistant",
      content,
      api: model.api,
      provider: model.provider,
      model: model.modelId,
      usage: toUsage(step.usage, model.cost),
      // A step that called tools stopped to use them, whatever finish reason the provider reported
      // (Workers AI's own tool-call shape carries none; test/runners/workers-ai.test.ts).
      stopReason:
        step.finishReason === "tool-calls" || step.toolCalls.length > 0
          ? "toolUse"
          : step.finishReason === "length"
            ? "length"
            : "stop",
      timestamp: now,
    },
  ];
  for (const call of step.toolCalls) {
    const outcome = step.content.find(
      (part) => (part.type === "tool-result" || part.type === "tool-error") && part.toolCallId === call.toolCallId,
    );
    if (outcome?.type !== "tool-result" && outcome?.type !== "tool-error") continue;
    const failed = outcome.type === "tool-error";
    const text = failed
      ? rejectionText(call.toolName, call.input, outcome.error)
      : typeof outcome.output === "string"
        ? outcome.output
        : JSON.stringify(outcome.output);
    messages.push({
      role: "toolResult",
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      content: [{ type: "text", text }],
      isError: failed,
      timestamp: now,
    });
  }
  return messages;
}

/**
 * A tool call's input as the transcript keeps it. Attachment bytes handed to sessions_spawn never enter
 * the requester's persisted transcript (test/tools/sessions-spawn.test.ts): their contents are redacted, and
 * arguments that are not a JSON object (the SDK keeps unparsable arguments as their raw text) are
 * redacted whole, since nothing tells which part of them is a file.
 */
function transcriptInput(toolName: string, input: unknown): unknown {
  if (toolName !== "sessions_spawn") return input;
  return input !== null && typeof input === "object" ? redactAttachmentArgs(input) : REDACTED_CONTENT;
}

/**
 * The text a rejected call's result keeps: what the SDK told the model, with the call's input shown as
 * the transcript keeps it. The SDK quotes the input whole in its validation and parse errors (`Value:`,
 * `Text:`; test/tools/run-tools.test.ts), so for sessions_spawn that quote is swapped for the redacted copy —
 * else the error would carry the attachment bytes the call's own arguments leave out. Its length is
 * bounded like every tool result's (`limits.maxMessageBytes`, docs/limits.md) when the row is stored.
 */
function rejectionText(toolName: string, input: unknown, error: unknown): string {
  const told = getErrorMessage(error);
  const kept = transcriptInput(toolName, input);
  if (kept === input) return told;
  const shown = JSON.stringify(kept);
  // Only the quotes themselves are swapped: a short input (`"a"`) may also occur elsewhere in the text.
  // A validation error quotes the parsed input as JSON; a parse error quotes the raw text.
  let text = told.split(`Value: ${JSON.stringify(input)}.`).join(`Value: ${shown}.`);
  if (typeof input === "string") text = text.split(`Text: ${input}.`).join(`Text: ${shown}.`);
  return text;
}

export function toUsage(
  u: { inputTokens?: number; outputTokens?: number; totalTokens?: number },
  cost?: { input?: number; output?: number },
): Usage {
  const input = u.inputTokens ?? 0;
  const output = u.outputTokens ?? 0;
  const usage: Usage = { input, output, cacheRead: 0, cacheWrite: 0, totalTokens: u.totalTokens ?? input + output };
  if (cost && (cost.input !== undefined || cost.output !== undefined)) {
    const ci = (input * (cost.input ?? 0)) / 1e6;
    const co = (output * (cost.output ?? 0)) / 1e6;
    usage.cost = { input: ci, output: co, cacheRead: 0, cacheWrite: 0, total: ci + co };
  }
  return usage;
}

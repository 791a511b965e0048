import type { SharedV4ProviderOptions } from "@ai-sdk/provider";
import { generateText } from "ai";
import { textOf } from "../runners/model-runner";
import type { ResolvedModel } from "../runners/models";
import { COMPACTION_STEP_HEADER } from "../send/control-tokens";
import { capText, cutText, storedTextBytes } from "../session/byte-budget";
import type { TranscriptMessage } from "../session/types";
import { SUMMARY_MAX_BYTES } from "./plan";

/**
 * The summary of older turns (docs/compaction.md), written by the session's model (or
 * `agents.defaults.compaction.model`) through the AI SDK like any run. Bounded: each message enters the
 * input cut to its share, the input is summarised in at most MAX_CHUNKS sequential calls (each folding the
 * summary so far into the next), every call has `timeoutSeconds`, and the result is cut at SUMMARY_MAX_BYTES
 * with OpenClaw's marker. The offline `builtin/echo` answers this step deterministically
 * (src/runners/builtin-models.ts), so compaction works without a provider.
 */

/** Summarisation calls per compaction at most: the input is split into this many chunks or fewer. */
export const MAX_CHUNKS = 4;
/** A chunk is at least this large (fewer, fuller calls for small inputs). */
const MIN_CHUNK_BYTES = 64 * 1024;
/** What of one message enters the input: a pasted document must not crowd out the conversation. */
const MESSAGE_INPUT_BYTES = 16 * 1024;
const TOOL_RESULT_INPUT_BYTES = 2 * 1024;
/** Output tokens a summarisation call may use (the stored summary is cut at SUMMARY_MAX_BYTES anyway). */
const SUMMARY_OUTPUT_TOKENS = 4096;

export const SUMMARY_TRUNCATED = "\n\n[Compaction summary truncated to fit budget]";

/** How the summary reaches later runs: OpenClaw's wording around it. */
export function summaryContext(summary: string): string {
  return `The conversation history before this point was compacted into the following summary:\n\n<summary>\n${summary}\n</summary>`;
}

export function summarySystemPrompt(keepIdentifiers: boolean): string {
  return [
    COMPACTION_STEP_HEADER,
    "You compact a conversation so it can go on with less context. Write a summary of it for the assistant's own later turns:",
    "what the user wants, decisions and facts established, work done and its results, open questions and next steps.",
    "Fold the previous summary (if any) and the new conversation into one summary. Plain text, concise, no preamble.",
    ...(keepIdentifiers
      ? ["Keep identifiers exactly as written: ids, keys, names, numbers, URLs, file paths, code symbols."]
      : []),
  ].join("\n");
}

/** One message as a line of the summarisation input, cut to its share. */
function lineOf(m: TranscriptMessage): string | null {
  switch (m.role) {
    case "user": {
      const text = typeof m.content === "string" ? m.content : textOf(m.content);
      const from =
        m.provenance?.kind === "inter_session" ? ` from ${m.provenance.sourceSessionKey ?? "another session"}` : "";
      return `[user${from}] ${capText(text, MESSAGE_INPUT_BYTES)}`;
    }
    case "assistant": {
      const calls = m.content.filter((b) => b.type === "toolCall").map((b) => (b.type === "toolCall" ? b.name : ""));
      const text = textOf(m.content).trim();
      if (!text && calls.length === 0) return null;
      return `[assistant] ${capText(text, MESSAGE_INPUT_BYTES)}${calls.length ? ` (called ${calls.join(", ")})` : ""}`;
    }
    case "toolResult":
      return `[tool result ${m.toolName}] ${capText(textOf(m.content), TOOL_RESULT_INPUT_BYTES)}`;
    default:
      return null; // earlier compaction markers and other system rows carry nothing to keep
  }
}

/** The input split into at most MAX_CHUNKS chunks of whole lines. */
export function summaryChunks(messages: TranscriptMessage[]): string[] {
  const lines = messages.map(lineOf).filter((l): l is string => l !== null);
  const total = lines.reduce((n, l) => n + storedTextBytes(l) + 1, 0);
  const size = Math.max(MIN_CHUNK_BYTES, Math.ceil(total / MAX_CHUNKS));
  const chunks: string[] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const line of lines) {
    const n = storedTextBytes(line) + 1;
    if (current.length > 0 && bytes + n > size && chunks.length < MAX_CHUNKS - 1) {
      chunks.push(current.join("\n"));
      current = [];
      bytes = 0;
    }
    current.push(line);
    bytes += n;
  }
  if (current.length > 0) chunks.push(current.join("\n"));
  return chunks;
}

export interface SummarizeRequest {
  model: ResolvedModel;
  previous?: string;
  messages: TranscriptMessage[];
  keepIdentifiers: boolean;
  timeoutMs: number;
  /** The run's signal: an abort or the run's deadline ends the compaction too. */
  signal: AbortSignal;
  providerOptions?: SharedV4ProviderOptions;
}

/** The new summary, or a thrown error (the caller keeps the history as it was). */
export async function summarize(req: SummarizeRequest): Promise<string> {
  let summary = req.previous;
  const instructions = summarySystemPrompt(req.keepIdentifiers);
  for (const chunk of summaryChunks(req.messages)) {
    const result = await generateText({
      model: req.model.model,
      instructions,
      messages: [
        {
          role: "user",
          content: `Previous summary:\n${summary ?? "(none)"}\n\nConversation to add:\n${chunk}\n\nWrite the updated summary.`,
        },
      ],
      maxOutputTokens: SUMMARY_OUTPUT_TOKENS,
      abortSignal: AbortSignal.any([req.signal, AbortSignal.timeout(req.timeoutMs)]),
      maxRetries: 1,
      ...(req.providerOptions ? { providerOptions: req.providerOptions } : {}),
      // As for runs (src/runners/model-runner.ts): no diagnostics-channel tracing.
      telemetry: { isEnabled: false },
    });
    const text = result.text.trim();
    if (!text) throw new Error("the model answered the compaction step with an empty summary");
    summary = text;
  }
  if (summary === undefined) throw new Error("nothing to summarise");
  return storedTextBytes(summary) <= SUMMARY_MAX_BYTES
    ? summary
    : cutText(summary, SUMMARY_MAX_BYTES - storedTextBytes(SUMMARY_TRUNCATED)) + SUMMARY_TRUNCATED;
}

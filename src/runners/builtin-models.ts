import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4GenerateResult,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
} from "@ai-sdk/provider";
import {
  A2A_ANNOUNCE_STEP_HEADER,
  A2A_REPLY_STEP_HEADER,
  ANNOUNCE_SKIP,
  COMPACTION_STEP_HEADER,
  REPLY_SKIP,
  SUBAGENT_ANNOUNCE_STEP_HEADER,
} from "../send/control-tokens";

/**
 * Offline models that plug into the AI SDK like any provider's model.
 * `builtin/echo` answers with the last user message: deterministic, no network — the default model,
 * so `npm start` and the test suite work on a machine with no model access. In the follow-up steps it
 * answers what a quiet agent would (see `echoStepAnswer`), so the default demo ends after one result.
 */
export function echoModel(): LanguageModelV4 {
  return {
    specificationVersion: "v4",
    provider: "builtin",
    modelId: "echo",
    supportedUrls: {},
    async doGenerate(options: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
      // Answer after one macrotask, as a provider answers after its I/O. Answering without ever yielding let a
      // session's queue run back to back inside one event-loop turn, so calls into that object (sends, reads,
      // aborts) waited for the whole queue: `BENCH_ONLY=sends npm run bench` (docs/scale.md).
      await new Promise((resolve) => setTimeout(resolve, 0));
      options.abortSignal?.throwIfAborted();
      const text =
        echoStepAnswer(systemText(options.prompt), lastUserText(options.prompt)) ?? lastUserText(options.prompt);
      return {
        content: [{ type: "text", text }],
        finishReason: { unified: "stop", raw: "stop" },
        usage: usageOf(promptChars(options.prompt), text.length),
        warnings: [],
      };
    },
    async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
      options.abortSignal?.throwIfAborted();
      const text =
        echoStepAnswer(systemText(options.prompt), lastUserText(options.prompt)) ?? lastUserText(options.prompt);
      const usage = usageOf(promptChars(options.prompt), text.length);
      return { stream: streamInChunks(text, usage, options.abortSignal) };
    },
  };
}

/** Pieces a streamed answer is cut into, so a watcher of the run sees it arrive in parts (test/events/events-run.test.ts). */
const STREAM_CHUNKS = 4;

/**
 * The answer as a provider would stream it: `text` in up to STREAM_CHUNKS deltas, each a macrotask
 * apart (watchers get each piece before the next is made), then the finish part with its usage.
 */
function streamInChunks(
  text: string,
  usage: LanguageModelV4GenerateResult["usage"],
  signal: AbortSignal | undefined,
): ReadableStream<LanguageModelV4StreamPart> {
  const size = Math.max(1, Math.ceil(text.length / STREAM_CHUNKS));
  const pieces: string[] = [];
  for (let at = 0; at < text.length; at += size) pieces.push(text.slice(at, at + size));
  let next = 0;
  return new ReadableStream<LanguageModelV4StreamPart>({
    start(c) {
      c.enqueue({ type: "stream-start", warnings: [] });
      if (pieces.length > 0) c.enqueue({ type: "text-start", id: "t0" });
    },
    async pull(c) {
      signal?.throwIfAborted();
      if (next < pieces.length) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        c.enqueue({ type: "text-delta", id: "t0", delta: pieces[next++] });
        return;
      }
      if (pieces.length > 0) c.enqueue({ type: "text-end", id: "t0" });
      c.enqueue({ type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage });
      c.close();
    },
  });
}

/**
 * The echo model's answer in a follow-up step, recognised by the first line of the step's system prompt:
 * an agent-to-agent reply-back turn stops the ping-pong, the agent-to-agent announce stays silent, and a
 * sub-agent announce adds no notes (empty: the requester still gets Status/Result/Stats, which
 * `ANNOUNCE_SKIP` would silence). Undefined in any other run: echo the last user message.
 */
export function echoStepAnswer(system: string, user = ""): string | undefined {
  // Before any other step: a compaction's input quotes the conversation, step prompts included.
  if (system.startsWith(COMPACTION_STEP_HEADER)) return echoSummary(user);
  if (system.includes(A2A_REPLY_STEP_HEADER)) return REPLY_SKIP;
  if (system.includes(A2A_ANNOUNCE_STEP_HEADER)) return ANNOUNCE_SKIP;
  if (system.includes(SUBAGENT_ANNOUNCE_STEP_HEADER)) return "";
  return undefined;
}

/** Bullets an echo summary keeps at most (the newest): deterministic and bounded. */
const ECHO_SUMMARY_BULLETS = 100;
const ECHO_SUMMARY_LINE_CHARS = 200;

/**
 * The echo model's compaction summary (src/compaction/summarize.ts): the previous summary's bullets and
 * the first line of each user message of the conversation to add — deterministic, so offline sessions and
 * tests compact without a provider, and what a user said is still in the context afterwards.
 */
export function echoSummary(input: string): string {
  const [head, rest = ""] = input.split("\n\nConversation to add:\n");
  const previous = head.replace(/^Previous summary:\n/, "");
  const bullets = previous.split("\n").filter((l) => l.startsWith("- "));
  const conversation = rest.replace(/\n\nWrite the updated summary\.$/, "");
  for (const line of conversation.split("\n")) {
    const m = /^\[user[^\]]*\] (.*)$/.exec(line);
    if (m) bullets.push(`- user: ${m[1].slice(0, ECHO_SUMMARY_LINE_CHARS)}`);
  }
  return [
    "Summary of the earlier conversation (builtin/echo keeps the first line of each user message):",
    ...bullets.slice(-ECHO_SUMMARY_BULLETS),
  ].join("\n");
}

function systemText(prompt: LanguageModelV4Prompt): string {
  return prompt
    .filter((m) => m.role === "system")
    .map((m) => m.content)
    .join("\n");
}

function lastUserText(prompt: LanguageModelV4Prompt): string {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i];
    if (m.role !== "user") continue;
    return m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
  }
  return "";
}

function promptChars(prompt: LanguageModelV4Prompt): number {
  let n = 0;
  for (const m of prompt) {
    if (typeof m.content === "string") n += m.content.length;
    else for (const p of m.content) if ("text" in p && typeof p.text === "string") n += p.text.length;
  }
  return n;
}

/** Deterministic token estimate (≈4 characters per token) so usage and stats lines are testable. */
function usageOf(inChars: number, outChars: number): LanguageModelV4GenerateResult["usage"] {
  return {
    inputTokens: { total: Math.ceil(inChars / 4), noCache: Math.ceil(inChars / 4), cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: Math.ceil(outChars / 4), text: Math.ceil(outChars / 4), reasoning: 0 },
  };
}

import type { RunKind, TranscriptMessage } from "./types";

/**
 * Which transcript rows a conversation reader does not see (sessions_history without `includeTools`,
 * list previews): tool results, assistant replies that are only a control token, and the prompts of
 * internal announce steps. Decided once, when the row is written, and stored in the row's `is_tool`
 * column, so history pages filter them in SQL by the same index as tool results and stay bounded
 * (transcript.ts `page`). `includeTools` shows them all.
 */

/** Replies that mean "say nothing" (docs/subagents.md); matched exactly after trimming. */
export const CONTROL_TOKENS: ReadonlySet<string> = new Set(["NO_REPLY", "REPLY_SKIP", "ANNOUNCE_SKIP"]);

/**
 * Runs whose user message is a prompt of ours, not something anyone said: the announce steps, and the
 * requester-mode completion event (internal context: child keys, stats — model context, never the
 * conversation; OpenClaw hides it from chat history too).
 */
const INTERNAL_PROMPT_RUNS: ReadonlySet<RunKind> = new Set([
  "subagent_announce",
  "a2a_announce",
  "subagent_completion",
]);

export function isControlTokenReply(msg: TranscriptMessage): boolean {
  if (msg.role !== "assistant" || msg.content.length === 0) return false;
  if (msg.content.some((b) => b.type !== "text")) return false;
  return CONTROL_TOKENS.has(
    msg.content
      .map((b) => (b.type === "text" ? b.text : ""))
      .join("")
      .trim(),
  );
}

/** True when the row is shown only with `includeTools`. `runKind` is the kind of the run that wrote a user message. */
export function shownOnlyWithTools(msg: TranscriptMessage, runKind?: RunKind): boolean {
  if (msg.role === "toolResult") return true;
  if (msg.role === "user") return runKind !== undefined && INTERNAL_PROMPT_RUNS.has(runKind);
  return isControlTokenReply(msg);
}

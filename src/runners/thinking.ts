import type { SharedV4ProviderOptions } from "@ai-sdk/provider";

/**
 * Thinking levels (`sessions_spawn.thinking`, `PATCH thinkingLevel`, `agents.*.thinking`) and how each
 * provider API receives them (docs/models.md). OpenAI APIs take `reasoning_effort`; `xhigh` is sent as
 * `high`, the highest effort every reasoning model accepts. Anthropic and Google take a thinking budget.
 * `off` sends nothing: the model's own default applies.
 */
export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];

export function parseThinkingLevel(v: string | undefined | null): ThinkingLevel | undefined {
  const s = v?.trim().toLowerCase();
  return (THINKING_LEVELS as readonly string[]).includes(s ?? "") ? (s as ThinkingLevel) : undefined;
}

export const INVALID_THINKING = (raw: string) =>
  `Invalid thinking level "${raw}". Use one of: ${THINKING_LEVELS.join(", ")}.`;

const OPENAI_EFFORT: Record<Exclude<ThinkingLevel, "off">, string> = {
  minimal: "minimal",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "high",
};
/** Thinking budgets in tokens (Anthropic's minimum is 1,024). */
const BUDGET: Record<Exclude<ThinkingLevel, "off">, number> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 16384,
  xhigh: 32768,
};

/**
 * Provider options carrying `level` for a model of `api`, or undefined when the API has no thinking
 * control (builtin/echo, Workers AI, webhook runtimes — those receive the level in their run request).
 * `optionsKey` is the AI SDK provider-options key of an OpenAI-compatible provider (its configured name).
 */
export function thinkingProviderOptions(
  api: string,
  optionsKey: string,
  level: ThinkingLevel | undefined,
): SharedV4ProviderOptions | undefined {
  if (!level || level === "off") return undefined;
  switch (api) {
    case "openai-completions":
      return { [optionsKey]: { reasoningEffort: OPENAI_EFFORT[level] } };
    case "openai-responses":
      // forceReasoning: a configured model id the SDK does not know as a reasoning model still gets the effort.
      return { openai: { reasoningEffort: OPENAI_EFFORT[level], forceReasoning: true } };
    case "anthropic-messages":
      return { anthropic: { thinking: { type: "enabled", budgetTokens: BUDGET[level] } } };
    case "google-generative-ai":
      return { google: { thinkingConfig: { thinkingBudget: BUDGET[level], includeThoughts: false } } };
    default:
      return undefined;
  }
}

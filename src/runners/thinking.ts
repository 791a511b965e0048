import type { SharedV4ProviderOptions } from "@ai-sdk/provider";

/**
 * Thinking levels (`sessions_spawn.thinking`, `PATCH thinkingLevel`, `agents.*.thinkingDefault`) and how each
 * provider API receives them (docs/models.md). These are OpenClaw's levels. OpenAI APIs take
 * `reasoning_effort`; `xhigh`, `max` and `ultra` are sent as `high`, the highest effort every reasoning
 * model accepts. Anthropic and Google take a thinking budget. `adaptive` lets the provider decide where it
 * can (Anthropic's adaptive thinking, Google's dynamic budget) and is `medium` for OpenAI APIs, the level
 * OpenClaw falls back to where adaptive thinking is not selectable. `off` sends nothing: the model's own
 * default applies.
 */
export const THINKING_LEVELS = [
  "off",
  "minimal",
  "low",
  "medium",
  "high",
  "xhigh",
  "adaptive",
  "max",
  "ultra",
] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];

/** OpenClaw's spellings of a level (its directive aliases, and model params' `false`/"disabled" for off). */
const ALIASES: Record<string, ThinkingLevel> = {
  "x-high": "xhigh",
  x_high: "xhigh",
  "extra-high": "xhigh",
  "extra high": "xhigh",
  extra_high: "xhigh",
  highest: "high",
  disabled: "off",
  false: "off",
};

/** A level as written (any case, OpenClaw's aliases), or undefined when it is not one. */
export function parseThinkingLevel(v: string | boolean | undefined | null): ThinkingLevel | undefined {
  if (v === false) return "off";
  if (typeof v !== "string") return undefined;
  const s = v.trim().toLowerCase();
  if ((THINKING_LEVELS as readonly string[]).includes(s)) return s as ThinkingLevel;
  return ALIASES[s];
}

export const INVALID_THINKING = (raw: string) =>
  `Invalid thinking level "${raw}". Use one of: ${THINKING_LEVELS.join(", ")}.`;

type OnLevel = Exclude<ThinkingLevel, "off">;

const OPENAI_EFFORT: Record<OnLevel, string> = {
  minimal: "minimal",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "high",
  adaptive: "medium",
  max: "high",
  ultra: "high",
};
/** Thinking budgets in tokens (Anthropic's minimum is 1,024); `adaptive` is not a budget (see below). */
const BUDGET: Record<Exclude<OnLevel, "adaptive">, number> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 16384,
  xhigh: 32768,
  max: 32768,
  ultra: 32768,
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
      return {
        anthropic: {
          thinking: level === "adaptive" ? { type: "adaptive" } : { type: "enabled", budgetTokens: BUDGET[level] },
        },
      };
    case "google-generative-ai":
      // A budget of -1 is Gemini's dynamic thinking: the model decides how much to think.
      return {
        google: {
          thinkingConfig: { thinkingBudget: level === "adaptive" ? -1 : BUDGET[level], includeThoughts: false },
        },
      };
    default:
      return undefined;
  }
}

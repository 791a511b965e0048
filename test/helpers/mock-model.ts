import type { LanguageModelV4 } from "@ai-sdk/provider";
import type { ResolvedModel } from "../../src/runners/models";

/** The usage a mock model reports for every step (the AI SDK's v4 shape). */
export const MOCK_USAGE = {
  inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 },
};

/** A mock AI SDK model as the runner receives a resolved model (`builtin/mock`), for calling `runModel` directly. */
export function resolvedMock(model: LanguageModelV4): ResolvedModel {
  return {
    ref: "builtin/mock",
    provider: "builtin",
    modelId: "mock",
    api: "builtin",
    model,
    thinkingOptions: () => undefined,
  };
}

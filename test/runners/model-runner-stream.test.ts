import type { LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { simulateReadableStream, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runModel } from "../../src/runners/model-runner";
import type { ResolvedModel } from "../../src/runners/models";
import { MOCK_USAGE, resolvedMock } from "../helpers/mock-model";

const usage = MOCK_USAGE;

/** A streaming model that calls `lookup` in its first step and answers in its second. */
function toolCallingModel(): ResolvedModel {
  let step = 0;
  const model = new MockLanguageModelV4({
    doStream: async () => {
      step++;
      const chunks: LanguageModelV4StreamPart[] =
        step === 1
          ? [
              { type: "stream-start", warnings: [] },
              { type: "text-start", id: "a" },
              { type: "text-delta", id: "a", delta: "Let me " },
              { type: "text-delta", id: "a", delta: "check." },
              { type: "text-end", id: "a" },
              { type: "tool-call", toolCallId: "call-1", toolName: "lookup", input: '{"q":"weather"}' },
              { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
            ]
          : [
              { type: "stream-start", warnings: [] },
              { type: "text-start", id: "b" },
              { type: "text-delta", id: "b", delta: "Sunny." },
              { type: "text-end", id: "b" },
              { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
            ];
      return { stream: simulateReadableStream({ chunks }) };
    },
  });
  return resolvedMock(model);
}

describe("the model runner streams through streamText (GET /v1/runs/{runId}/events)", () => {
  it("forwards text deltas and tool calls as they arrive, step by step, and still records each step", async () => {
    const live: string[] = [];
    const steps: string[][] = [];
    const result = await runModel({
      model: toolCallingModel(),
      system: "s",
      history: [{ role: "user", content: [{ type: "text", text: "weather?" }], timestamp: 0 }],
      tools: { lookup: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => `${q}: sunny` }) },
      signal: new AbortController().signal,
      onStep: (messages) => {
        live.push("step");
        steps.push(messages.map((m) => m.role));
      },
      live: {
        onDelta: (text) => live.push(`delta:${text}`),
        onToolCall: (call) => live.push(`tool-call:${JSON.stringify(call)}`),
      },
    });
    expect(live).toEqual([
      "delta:Let me ",
      "delta:check.",
      `tool-call:${JSON.stringify({ toolCallId: "call-1", toolName: "lookup", args: { q: "weather" } })}`,
      "step",
      "delta:Sunny.",
      "step",
    ]);
    expect(steps).toEqual([["assistant", "toolResult"], ["assistant"]]);
    expect(result.reply).toBe("Sunny.");
  });
});

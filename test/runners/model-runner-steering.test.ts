import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { simulateReadableStream, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runModel } from "../../src/runners/model-runner";
import type { TranscriptMessage } from "../../src/session/types";
import { MOCK_USAGE, resolvedMock } from "../helpers/mock-model";

const usage = MOCK_USAGE;

/** A model that calls `lookup` in its first step and answers in its second, recording each step's prompt. */
function twoStepModel(prompts: LanguageModelV4CallOptions["prompt"][]) {
  const parts = (step: number): LanguageModelV4StreamPart[] =>
    step === 1
      ? [
          { type: "stream-start", warnings: [] },
          { type: "tool-call", toolCallId: "call-1", toolName: "lookup", input: '{"q":"x"}' },
          { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
        ]
      : [
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "b" },
          { type: "text-delta", id: "b", delta: "done" },
          { type: "text-end", id: "b" },
          { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
        ];
  const model = new MockLanguageModelV4({
    doStream: async (opts) => {
      prompts.push(opts.prompt);
      return { stream: simulateReadableStream({ chunks: parts(prompts.length) }) };
    },
    doGenerate: async (opts) => {
      prompts.push(opts.prompt);
      const step = prompts.length;
      return step === 1
        ? {
            content: [{ type: "tool-call", toolCallId: "call-1", toolName: "lookup", input: '{"q":"x"}' }],
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage,
            warnings: [],
          }
        : {
            content: [{ type: "text", text: "done" }],
            finishReason: { unified: "stop", raw: "stop" },
            usage,
            warnings: [],
          };
    },
  });
  return resolvedMock(model);
}

const steerMessage: TranscriptMessage = {
  role: "user",
  content: [{ type: "text", text: "use plan B" }],
  timestamp: 1,
  provenance: { kind: "inter_session", sourceSessionKey: "agent:main:boss", sourceTool: "sessions_send" },
};

/** The user texts of one recorded prompt, in order. */
const userTexts = (prompt: LanguageModelV4CallOptions["prompt"]) =>
  prompt
    .filter((m) => m.role === "user")
    .map((m) => (m.content as { type: string; text?: string }[]).map((p) => p.text ?? "").join(""));

describe("steering at the step boundary (sessions_send mode=steer, src/runners/model-runner.ts)", () => {
  for (const streaming of [false, true]) {
    it(`what the steering hook returns at a boundary joins the next model call and every later one (${streaming ? "streamText" : "generateText"})`, async () => {
      const prompts: LanguageModelV4CallOptions["prompt"][] = [];
      const asked: number[] = [];
      let calls = 0;
      const result = await runModel({
        model: twoStepModel(prompts),
        system: "s",
        history: [{ role: "user", content: [{ type: "text", text: "start" }], timestamp: 0 }],
        tools: { lookup: tool({ inputSchema: z.object({ q: z.string() }), execute: async () => "found" }) },
        signal: new AbortController().signal,
        onStep: () => {},
        // Nothing before the first step; the steer is waiting at the second boundary.
        steering: () => {
          asked.push(prompts.length);
          return calls++ === 1 ? [steerMessage] : [];
        },
        ...(streaming ? { live: { onDelta: () => {}, onToolCall: () => {} } } : {}),
      });
      expect(result.reply).toBe("done");
      // Asked once before each model call: before the first (0 prompts sent) and before the second (1 sent).
      expect(asked).toEqual([0, 1]);
      expect(userTexts(prompts[0])).toEqual(["start"]);
      // The second call sees the step's tool exchange, then the steer, marked as inter-session input.
      expect(prompts[1].map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "user"]);
      expect(userTexts(prompts[1])).toEqual([
        "start",
        "[Inter-session message] sourceSession=agent:main:boss sourceChannel=unknown sourceTool=sessions_send\nuse plan B",
      ]);
    });
  }
});

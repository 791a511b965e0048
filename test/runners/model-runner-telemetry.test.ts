import { tracingChannel } from "node:diagnostics_channel";
import { simulateReadableStream, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runModel } from "../../src/runners/model-runner";
import { MOCK_USAGE, resolvedMock } from "../helpers/mock-model";

const usage = MOCK_USAGE;

/** Calls `lookup` in its first step and answers in its second, in one piece or streamed. */
function toolCallingModel(): MockLanguageModelV4 {
  let generated = 0;
  let streamed = 0;
  const finish = (first: boolean) =>
    first ? ({ unified: "tool-calls", raw: "tool_calls" } as const) : ({ unified: "stop", raw: "stop" } as const);
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const first = ++generated === 1;
      return {
        content: first
          ? [{ type: "tool-call", toolCallId: "g1", toolName: "lookup", input: '{"q":"a"}' }]
          : [{ type: "text", text: "done" }],
        finishReason: finish(first),
        usage,
        warnings: [],
      };
    },
    doStream: async () => {
      const first = ++streamed === 1;
      return {
        stream: simulateReadableStream({
          chunks: [
            { type: "stream-start", warnings: [] },
            ...(first
              ? [{ type: "tool-call", toolCallId: "s1", toolName: "lookup", input: '{"q":"b"}' } as const]
              : [
                  { type: "text-start", id: "t" } as const,
                  { type: "text-delta", id: "t", delta: "done" } as const,
                  { type: "text-end", id: "t" } as const,
                ]),
            { type: "finish", finishReason: finish(first), usage },
          ],
        }),
      };
    },
  });
}

describe("a run's AI SDK telemetry", () => {
  it("is off: a run, in one piece or streamed, with tool steps, publishes nothing on the SDK's tracing channel", async () => {
    // workerd's TracingChannel has `hasSubscribers` as a method, never `false`, so without the opt-out the SDK
    // traces every call, step and tool execution through node:diagnostics_channel for no subscriber.
    const seen: string[] = [];
    const record = (phase: string) => (message: unknown) =>
      seen.push(`${phase}:${(message as { type?: string }).type}`);
    const handlers = {
      start: record("start"),
      end: record("end"),
      asyncStart: record("asyncStart"),
      asyncEnd: record("asyncEnd"),
      error: record("error"),
    };
    const channel = tracingChannel("ai:telemetry");
    channel.subscribe(handlers);
    try {
      const model = toolCallingModel();
      const replies: string[] = [];
      for (const live of [undefined, { onDelta: () => {}, onToolCall: () => {} }]) {
        const result = await runModel({
          model: resolvedMock(model),
          system: "s",
          history: [{ role: "user", content: [{ type: "text", text: "go" }], timestamp: 0 }],
          tools: { lookup: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }) },
          signal: new AbortController().signal,
          onStep: () => {},
          live,
        });
        replies.push(result.reply);
      }
      expect(replies).toEqual(["done", "done"]);
      expect(model.doGenerateCalls.length + model.doStreamCalls.length).toBe(4);
    } finally {
      channel.unsubscribe(handlers);
    }
    expect(seen).toEqual([]);
  });
});

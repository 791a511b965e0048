import { env } from "cloudflare:workers";
import { asSchema, zodSchema } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { runModel } from "../../src/runners/model-runner";
import type { SessionMeta, TranscriptMessage } from "../../src/session/types";
import { TOOLS } from "../../src/tools/registry";
import { buildRunTools } from "../../src/tools/run-tools";
import "../../src/index";
import { MOCK_USAGE, resolvedMock } from "../helpers/mock-model";

const usage = MOCK_USAGE;

function metaOf(key: string, extra: Partial<SessionMeta> = {}): SessionMeta {
  return {
    key,
    agentId: "main",
    sessionId: crypto.randomUUID(),
    kind: "direct",
    createdAt: 0,
    updatedAt: 0,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    systemSent: false,
    abortedLastRun: false,
    ...extra,
  } as SessionMeta;
}

/** A model whose first step makes these tool calls and whose second answers "done". */
function callsThenDone(calls: { type: "tool-call"; toolCallId: string; toolName: string; input: string }[]) {
  let step = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      step++;
      return step === 1
        ? { content: calls, finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] }
        : {
            content: [{ type: "text", text: "done" }],
            finishReason: { unified: "stop", raw: "stop" },
            usage,
            warnings: [],
          };
    },
  });
}

/** A model that answers "ok" at once; every call's options (the tools it was offered) stay in `doGenerateCalls`. */
function answeringModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    doGenerate: async () => ({
      content: [{ type: "text", text: "ok" }],
      finishReason: { unified: "stop", raw: "stop" },
      usage,
      warnings: [],
    }),
  });
}

/** One run of `model` as session `meta`, with the session tools; `steps` collects each step's transcript rows. */
async function runWith(model: MockLanguageModelV4, meta: SessionMeta, text = "hi", steps: TranscriptMessage[][] = []) {
  return runModel({
    model: resolvedMock(model),
    system: "s",
    history: [{ role: "user", content: [{ type: "text", text }], timestamp: 0 }],
    tools: buildRunTools(env, meta),
    signal: new AbortController().signal,
    onStep: (messages) => steps.push(messages),
  });
}

describe("the session tools of a built-in run", () => {
  it("hand every run the same JSON Schema object per tool, equal to the AI SDK's own conversion of the tool's zod schema, with the registry's description", async () => {
    const model = answeringModel();
    await runWith(model, metaOf("agent:main:one"));
    await runWith(model, metaOf("agent:main:two"));
    // An orchestrator sub-agent is offered fewer tools; the ones it has carry the same schemas.
    setConfigOverride({ agents: { defaults: { subagents: { maxSpawnDepth: 2 } } } });
    await runWith(model, metaOf("agent:main:subagent:x", { spawnDepth: 1 }));
    const [first, second, sub] = model.doGenerateCalls.map((c) => c.tools ?? []);
    expect(first.map((t) => t.name)).toEqual(TOOLS.map((t) => t.name));
    expect(sub.map((t) => t.name)).toEqual([
      "sessions_list",
      "sessions_history",
      "sessions_search",
      "sessions_spawn",
      "sessions_yield",
      "subagents",
    ]);
    for (const def of TOOLS) {
      const a = first.find((t) => t.name === def.name)!;
      const b = second.find((t) => t.name === def.name)!;
      expect(a.type === "function" && a.description).toBe(def.description);
      const schemaOf = (t: typeof a) => (t.type === "function" ? t.inputSchema : undefined);
      // Converted once per isolate, not on every run (the conversion cost ~4% of a send burst's CPU).
      expect(schemaOf(b)).toBe(schemaOf(a));
      const s = sub.find((t) => t.name === def.name);
      if (s) expect(schemaOf(s)).toBe(schemaOf(a));
      // What a provider is sent is unchanged: the schema the SDK derives from the zod schema itself.
      expect(schemaOf(a)).toEqual(await asSchema(zodSchema(def.schema)).jsonSchema);
    }
  });

  it("answer a model's tool call with bad input by the SDK's validation error, without running the tool, and record that error as the call's result, in call order", async () => {
    // A valid call first, then the bad one: the SDK reports the bad one before the good one has run.
    const model = callsThenDone([
      { type: "tool-call", toolCallId: "c0", toolName: "agents_list", input: "{}" },
      { type: "tool-call", toolCallId: "c1", toolName: "sessions_list", input: '{"limit":"many"}' },
    ]);
    const steps: TranscriptMessage[][] = [];
    const result = await runWith(model, metaOf("agent:main:bad-input"), "list", steps);
    expect(result.reply).toBe("done");
    const told = `AI_InvalidToolInputError: Invalid input for tool sessions_list: AI_TypeValidationError: Type validation failed: Value: {"limit":"many"}.\nError message: ${JSON.stringify(
      [
        {
          expected: "number",
          code: "invalid_type",
          path: ["limit"],
          message: "Invalid input: expected number, received string",
        },
      ],
      null,
      2,
    )}`;
    // The model is told why, in the SDK's words, and may try again; the tool's handler never ran.
    const toolMessage = model.doGenerateCalls[1].prompt.find((m) => m.role === "tool");
    expect(toolMessage?.content.find((p) => p.type === "tool-result" && p.toolCallId === "c1")).toEqual({
      type: "tool-result",
      toolCallId: "c1",
      toolName: "sessions_list",
      output: { type: "error-text", value: told },
    });
    // The transcript keeps every call with its result, in call order: the rejected one with what the model was told.
    expect(steps.map((messages) => messages.map((m) => m.role))).toEqual([
      ["assistant", "toolResult", "toolResult"],
      ["assistant"],
    ]);
    const [, listed, rejected] = steps[0];
    expect(listed).toMatchObject({ role: "toolResult", toolCallId: "c0", toolName: "agents_list", isError: false });
    expect(rejected).toEqual({
      role: "toolResult",
      toolCallId: "c1",
      toolName: "sessions_list",
      content: [{ type: "text", text: told }],
      isError: true,
      timestamp: expect.any(Number),
    });
  });

  it("record a sessions_spawn call whose arguments are not JSON without any of its text, in the call and in its error result", async () => {
    const raw = '{"task":"t","attachments":[{"name":"s.txt","content":"TOP-SECRET-BYTES"';
    const model = callsThenDone([{ type: "tool-call", toolCallId: "c1", toolName: "sessions_spawn", input: raw }]);
    const steps: TranscriptMessage[][] = [];
    await runWith(model, metaOf("agent:main:bad-json"), "spawn", steps);
    // The model itself was told the parse error with its text (it needs it to try again).
    const told = JSON.stringify(model.doGenerateCalls[1].prompt.find((m) => m.role === "tool"));
    expect(told).toContain("TOP-SECRET-BYTES");
    const [call, result] = steps[0];
    expect(call.role === "assistant" && call.content).toEqual([
      { type: "toolCall", id: "c1", name: "sessions_spawn", arguments: "__OPENCLAW_REDACTED__" },
    ]);
    expect(result).toMatchObject({ role: "toolResult", toolCallId: "c1", toolName: "sessions_spawn", isError: true });
    const text = result.role === "toolResult" && result.content[0].type === "text" ? result.content[0].text : "";
    expect(text).toMatch(
      /^AI_InvalidToolInputError: Invalid input for tool sessions_spawn: AI_JSONParseError: JSON parsing failed: Text: "__OPENCLAW_REDACTED__"\.\nError message: /,
    );
    expect(JSON.stringify(steps)).not.toContain("TOP-SECRET");
  });
});

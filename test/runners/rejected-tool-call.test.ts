import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { TOOLS } from "../../src/tools/registry";
import { call, enc, sendAndWait } from "../helpers/http";
import {
  installFakes,
  type ModelAnswer,
  releaseAndSettleChildren,
  requesterKey,
  subagentConfig,
} from "../helpers/subagents";

afterEach(releaseAndSettleChildren);

/** Every transcript row after the session header line. */
async function transcriptOf(key: string): Promise<any[]> {
  const body = (await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json as string;
  return body
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => JSON.parse(line).message);
}

/** A model whose first answer is `first` (a tool call), then "answer <n>" for its n-th call. */
function scriptedModel(first: ModelAnswer) {
  let calls = 0;
  return installFakes(() => (++calls === 1 ? first : `answer ${calls}`));
}

const ISSUES = (issues: unknown[]) => JSON.stringify(issues, null, 2);

describe("a model's tool call the AI SDK rejects", () => {
  it("is recorded with its error result, the text the model was told; the session's next run works and history shows both", async () => {
    setConfigOverride(subagentConfig());
    const fakes = scriptedModel({ toolCall: { name: "sessions_list", args: { limit: "many" } } });
    const key = requesterKey("bad-call");
    const run1 = await sendAndWait(key, "list them");
    expect(run1).toMatchObject({ status: "ok", reply: "answer 2" });
    const told = `AI_InvalidToolInputError: Invalid input for tool sessions_list: AI_TypeValidationError: Type validation failed: Value: {"limit":"many"}.\nError message: ${ISSUES(
      [
        {
          expected: "number",
          code: "invalid_type",
          path: ["limit"],
          message: "Invalid input: expected number, received string",
        },
      ],
    )}`;
    const rows = await transcriptOf(key);
    expect(rows.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(rows[1].content).toEqual([
      { type: "toolCall", id: "call_1", name: "sessions_list", arguments: { limit: "many" } },
    ]);
    expect(rows[2]).toEqual({
      role: "toolResult",
      toolCallId: "call_1",
      toolName: "sessions_list",
      content: [{ type: "text", text: told }],
      isError: true,
      timestamp: expect.any(Number),
    });

    // Run 2 of the same session, whose history holds run 1's call and result.
    const run2 = await sendAndWait(key, "again");
    expect(run2).toMatchObject({ status: "ok", reply: "answer 3" });
    expect(fakes.model[2].lastUser).toBe("again");
    expect((await transcriptOf(key)).map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "toolResult",
      "assistant",
      "user",
      "assistant",
    ]);
    const history = (await call("GET", `/v1/sessions/${enc(key)}/history?includeTools=true`)).json;
    expect(history.messages.map((m: any) => [m.role, m.toolCallId ?? null, m.isError ?? null])).toEqual([
      ["user", null, null],
      ["assistant", null, null],
      ["toolResult", "call_1", true],
      ["assistant", null, null],
      ["user", null, null],
      ["assistant", null, null],
    ]);
  });

  it("a call of a tool the session does not have gets the SDK's unavailable-tool error as its result", async () => {
    setConfigOverride(subagentConfig());
    scriptedModel({ toolCall: { name: "shell_exec", args: { cmd: "ls" } } });
    const key = requesterKey("unknown-tool");
    expect(await sendAndWait(key, "run ls")).toMatchObject({ status: "ok", reply: "answer 2" });
    const rows = await transcriptOf(key);
    expect(rows.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(rows[1].content).toEqual([{ type: "toolCall", id: "call_1", name: "shell_exec", arguments: { cmd: "ls" } }]);
    expect(rows[2]).toEqual({
      role: "toolResult",
      toolCallId: "call_1",
      toolName: "shell_exec",
      content: [
        {
          type: "text",
          // A main session is offered every tool, in the registry's order.
          text: `AI_NoSuchToolError: Model tried to call unavailable tool 'shell_exec'. Available tools: ${TOOLS.map((t) => t.name).join(", ")}.`,
        },
      ],
      isError: true,
      timestamp: expect.any(Number),
    });
  });

  it("a rejected sessions_spawn call leaves no attachment bytes in the transcript: its error quotes the redacted input", async () => {
    setConfigOverride(subagentConfig({ tools: { sessions_spawn: { attachments: { enabled: true } } } }));
    const args = {
      task: "use the file",
      mode: "forever",
      attachments: [{ name: "s.txt", content: "TOP-SECRET-CONTENT" }],
    };
    const fakes = scriptedModel({ toolCall: { name: "sessions_spawn", args } });
    const key = requesterKey("bad-spawn");
    expect(await sendAndWait(key, "spawn a helper")).toMatchObject({ status: "ok", reply: "answer 2" });
    // The model itself was told the error (its input unredacted: test/tools/run-tools.test.ts) and answered.
    expect(fakes.model.map((c) => c.hasToolResult)).toEqual([false, true]);
    const body = (await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json as string;
    expect(body).not.toContain("TOP-SECRET");
    const rows = await transcriptOf(key);
    const redacted = { ...args, attachments: [{ content: "__OPENCLAW_REDACTED__", name: "s.txt" }] };
    expect(rows[1].content).toEqual([{ type: "toolCall", id: "call_1", name: "sessions_spawn", arguments: redacted }]);
    expect(rows[2]).toEqual({
      role: "toolResult",
      toolCallId: "call_1",
      toolName: "sessions_spawn",
      content: [
        {
          type: "text",
          text: `AI_InvalidToolInputError: Invalid input for tool sessions_spawn: AI_TypeValidationError: Type validation failed: Value: ${JSON.stringify(
            redacted,
          )}.\nError message: ${ISSUES([
            {
              code: "invalid_value",
              values: ["run", "session"],
              path: ["mode"],
              message: 'Invalid option: expected one of "run"|"session"',
            },
          ])}`,
        },
      ],
      isError: true,
      timestamp: expect.any(Number),
    });
  });

  it("sessions_spawn arguments that are a JSON string are redacted whole, and only the error's quote of them changes", async () => {
    setConfigOverride(subagentConfig());
    scriptedModel({ toolCall: { name: "sessions_spawn", args: "a" } });
    const key = requesterKey("string-spawn");
    expect(await sendAndWait(key, "spawn")).toMatchObject({ status: "ok", reply: "answer 2" });
    const rows = await transcriptOf(key);
    expect(rows[1].content).toEqual([
      { type: "toolCall", id: "call_1", name: "sessions_spawn", arguments: "__OPENCLAW_REDACTED__" },
    ]);
    expect(rows[2].content).toEqual([
      {
        type: "text",
        text: `AI_InvalidToolInputError: Invalid input for tool sessions_spawn: AI_TypeValidationError: Type validation failed: Value: "__OPENCLAW_REDACTED__".\nError message: ${ISSUES(
          [
            {
              expected: "object",
              code: "invalid_type",
              path: [],
              message: "Invalid input: expected object, received string",
            },
          ],
        )}`,
      },
    ]);
  });
});

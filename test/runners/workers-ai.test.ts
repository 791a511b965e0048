import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call, enc, invoke, sendAndWait } from "../helpers/http";
import { openStream } from "../helpers/sse";
import { pieces, workersAiStream } from "../helpers/wire-streams";

/**
 * `workers-ai/<model>` runs through workers-ai-provider on the `AI` binding (src/runners/models.ts).
 * The binding is remote-only, so the tests install a fake one on the env the Worker and its objects
 * share with the test isolate: it answers `run(model, inputs)` the way Workers AI does.
 */
const MODEL = "@cf/meta/llama-3.3-70b-instruct-fp8-fast";

interface AiCall {
  model: string;
  inputs: any;
}

type Answer = (inputs: any, n: number) => Record<string, unknown>;

/**
 * `run` answers `stream: true` (every remote run streams, src/runners/builtin-run.ts) with the answer as an
 * event stream (test/helpers/wire-streams.ts), and other calls with the object. With `gate`, each call
 * waits until `gate.open` (polled: settling a promise from the test would cross I/O contexts).
 */
function installFakeAi(answer: Answer, gate?: { open: boolean }): AiCall[] {
  const calls: AiCall[] = [];
  (env as { AI?: unknown }).AI = {
    async run(model: string, inputs: any) {
      calls.push({ model, inputs: structuredClone(inputs) });
      const n = calls.length - 1;
      while (gate && !gate.open) await new Promise((r) => setTimeout(r, 2));
      const a = answer(inputs, n);
      return inputs.stream ? workersAiStream(a) : a;
    },
  };
  return calls;
}

function useWorkersAi(agent: string) {
  setConfigOverride({ agents: { list: [{ id: agent, default: true, model: `workers-ai/${MODEL}` }] } });
}

afterEach(() => {
  delete (env as { AI?: unknown }).AI;
});

/** The two answer shapes the binding returns: Workers AI's own, and the chat-completions one of newer models. */
const SHAPES: Record<string, { toolCall: Record<string, unknown>; text: (t: string) => Record<string, unknown> }> = {
  "Workers AI's own shape": {
    toolCall: {
      response: "",
      tool_calls: [{ name: "agents_list", arguments: {} }],
      usage: { prompt_tokens: 40, completion_tokens: 6 },
    },
    text: (t) => ({ response: t, usage: { prompt_tokens: 55, completion_tokens: 7 } }),
  },
  "the chat-completions shape": {
    toolCall: {
      choices: [
        {
          message: {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_1", type: "function", function: { name: "agents_list", arguments: "{}" } }],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 40, completion_tokens: 6 },
    },
    text: (t) => ({
      choices: [{ message: { role: "assistant", content: t }, finish_reason: "stop" }],
      usage: { prompt_tokens: 55, completion_tokens: 7 },
    }),
  },
};

describe.each(Object.keys(SHAPES))("Workers AI through workers-ai-provider, %s", (shape) => {
  it("a tool call round-trips: the binding gets the session tools, the tool result goes back, the final text is the reply", async () => {
    const agent = `wai${Object.keys(SHAPES).indexOf(shape)}`;
    useWorkersAi(agent);
    const reply = `One agent here: ${agent}.`;
    const calls = installFakeAi((_inputs, n) => (n === 0 ? SHAPES[shape].toolCall : SHAPES[shape].text(reply)));
    const run = await sendAndWait("main", "which agents are there?");
    expect(run).toMatchObject({ status: "ok", reply, usage: { input: 95, output: 13 } });

    expect(calls.map((c) => c.model)).toEqual([MODEL, MODEL]);
    const offered = (calls[0].inputs.tools as any[]).map((t) => t.function?.name ?? t.name);
    expect(offered).toContain("agents_list");
    expect(calls[0].inputs.messages.at(-1)).toEqual({ role: "user", content: "which agents are there?" });
    // The second call carries the assistant's tool call and the tool's result back to the model.
    const second = calls[1].inputs.messages as any[];
    const toolCall = second.find((m) => m.role === "assistant" && m.tool_calls?.length);
    expect(toolCall.tool_calls[0].function.name).toBe("agents_list");
    const toolResult = second.find((m) => m.role === "tool");
    expect(toolResult.tool_call_id).toBe(toolCall.tool_calls[0].id);
    expect(JSON.parse(toolResult.content)).toMatchObject({ requester: agent, agents: [{ id: agent }] });

    const h = await invoke("sessions_history", { sessionKey: "main", includeTools: true });
    const msgs = h.details.messages as any[];
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(msgs[1].content).toEqual([{ type: "toolCall", id: expect.any(String), name: "agents_list", arguments: {} }]);
    expect(msgs[1]).toMatchObject({ api: "workers-ai", provider: "workers-ai", model: MODEL, stopReason: "toolUse" });
    expect(JSON.parse(msgs[2].content[0].text)).toMatchObject({ requester: agent });
    expect(msgs[3].content).toEqual([{ type: "text", text: reply }]);
  });

  it("every run streams: a watcher who opens the run's stream after the send gets its tool call, its text in several deltas, then its status; it ends as one nobody watched", async () => {
    const agent = `waiw${Object.keys(SHAPES).indexOf(shape)}`;
    useWorkersAi(agent);
    const reply = `Only ${agent} answers here.`;
    const gate = { open: true };
    const calls = installFakeAi(
      (_inputs, n) => (n % 2 === 0 ? SHAPES[shape].toolCall : SHAPES[shape].text(reply)),
      gate,
    );
    const unwatched = await sendAndWait("main", "who?");
    // Sent with nobody watching; the run has started (its first call held by the fake) before the watcher arrives.
    gate.open = false;
    const posted = await call("POST", `/v1/sessions/${enc("main")}/messages`, { message: "who?" });
    await vi.waitFor(() => expect(calls).toHaveLength(3));
    const { sse } = await openStream(`/v1/runs/${posted.json.runId}/events`);
    gate.open = true;
    const events = await sse.rest();
    expect(calls.map((c) => c.inputs.stream === true)).toEqual([true, true, true, true]);
    const deltas = events.filter((e) => e.event === "delta").map((e) => JSON.parse(e.data).text);
    expect(deltas).toEqual(pieces(reply));
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(events.map((e) => e.event)).toEqual(["tool-call", ...deltas.map(() => "delta"), "status"]);
    expect(JSON.parse(events[0].data)).toEqual({ toolCallId: expect.any(String), toolName: "agents_list", args: {} });
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ status: "ok", reply });
    const run = (await call("GET", `/v1/runs/${posted.json.runId}`)).json;
    expect(run).toMatchObject({ status: "ok", reply, usage: { input: 95, output: 13 } });
    expect(unwatched).toMatchObject({ status: "ok", reply, usage: run.usage });
    // The transcript rows of both runs: the same, step by step.
    const h = await invoke("sessions_history", { sessionKey: "main", includeTools: true });
    const rows = (h.details.messages as any[]).map(({ timestamp: _t, __switchboard: _s, ...m }) =>
      JSON.parse(JSON.stringify(m, (k, v) => (k === "id" || k === "toolCallId" ? "<id>" : v))),
    );
    expect(rows.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "toolResult",
      "assistant",
      "user",
      "assistant",
      "toolResult",
      "assistant",
    ]);
    expect(rows.slice(4)).toEqual(rows.slice(0, 4));
    expect(rows[3]).toMatchObject({
      api: "workers-ai",
      model: MODEL,
      stopReason: "stop",
      content: [{ type: "text", text: reply }],
    });
  });
});

describe("Workers AI without the binding", () => {
  it("a workers-ai model is refused by name", async () => {
    useWorkersAi("nobinding");
    const r = await invoke("sessions_spawn", { task: "t", model: `workers-ai/${MODEL}` });
    expect(r.details).toMatchObject({
      status: "error",
      error: `invalid model: workers-ai/${MODEL} (no Workers AI binding "AI" is bound)`,
    });
  });
});

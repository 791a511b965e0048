import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { RunStreams } from "../../src/events/run-stream";
import { fakeWire, WIRE_BASE, type WireApi, type WireCall } from "../helpers/fake-wire";
import { advance, call, enc, sendAndWait } from "../helpers/http";
import { openStream } from "../helpers/sse";
import { pieces } from "../helpers/wire-streams";

/**
 * A run on any remote provider API always streams through the AI SDK's `streamText`
 * (src/runners/builtin-run.ts), so a client that sends, gets the runId and only then opens
 * GET /v1/runs/{runId}/events sees the model's tool call and its text in the pieces the fake provider
 * streams (test/helpers/wire-streams.ts). The offline builtin model streams only when someone watches
 * its session as the run starts.
 */

const APIS: WireApi[] = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"];
const REPLY = "Two agents answer on this gateway.";

function useApi(api: WireApi, agent: string) {
  setConfigOverride({
    agents: { list: [{ id: agent, default: true, model: "p/m1" }] },
    models: {
      providers: {
        p: { api, baseUrl: WIRE_BASE[api], apiKey: "key-1", models: [{ id: "m1", cost: { input: 3, output: 15 } }] },
      },
    },
  });
}

const streamedRequest = (c: WireCall) => c.body.stream === true || c.url.includes(":streamGenerateContent");

/** Transcript rows without what differs between two runs (times, ids). */
function comparable(rows: any[]): unknown {
  return JSON.parse(
    JSON.stringify(rows, (k, v) => (k === "timestamp" ? undefined : k === "id" || k === "toolCallId" ? "<id>" : v)),
  );
}

describe.each(APIS)("provider api %s streams every run", (api) => {
  it("a watcher who opens the run's stream after the send gets the tool call, the text in several deltas, then the status; the run ends as one nobody watched", async () => {
    const agent = `live${APIS.indexOf(api)}`;
    useApi(api, agent);
    const gate = { open: true };
    // Each run: a tool call, then the text.
    const calls = fakeWire(api, (n) => (n % 2 === 0 ? { tool: "agents_list", args: {} } : { text: REPLY }), gate);

    // A run nobody ever watches.
    const unwatched = await sendAndWait("main", "who is here?");

    // The usual client: send with nobody watching, get the runId, then open the run's stream. The run
    // has started (its first call reached the provider, held there) before the watcher arrives.
    gate.open = false;
    const posted = await call("POST", `/v1/sessions/${enc("main")}/messages`, { message: "who is here?" });
    expect(posted.status).toBe(202);
    const runId: string = posted.json.runId;
    await vi.waitFor(() => expect(calls).toHaveLength(3));
    const { res, sse } = await openStream(`/v1/runs/${runId}/events`);
    expect(res.status).toBe(200);
    gate.open = true;

    const events = await sse.rest();
    expect(calls.map(streamedRequest)).toEqual([true, true, true, true]);
    const deltas = events.filter((e) => e.event === "delta").map((e) => JSON.parse(e.data).text);
    expect(deltas).toEqual(pieces(REPLY));
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(events.map((e) => e.event)).toEqual(["tool-call", ...deltas.map(() => "delta"), "status"]);
    const toolCall = JSON.parse(events[0].data);
    expect(toolCall).toEqual({ toolCallId: expect.any(String), toolName: "agents_list", args: {} });
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ status: "ok", reply: REPLY });

    // Reply and usage as in one body (two calls of 11 input and 3 output tokens; test/runners/provider-apis.test.ts).
    const watched = (await call("GET", `/v1/runs/${runId}`)).json;
    expect(watched).toMatchObject({ status: "ok", reply: REPLY, usage: { input: 22, output: 6, totalTokens: 28 } });
    expect(unwatched).toMatchObject({ status: "ok", reply: REPLY });
    expect(watched.usage).toEqual(unwatched.usage);
    // The stored rows, whole (with each call's usage and cost): the export, one line per message.
    const exported = String((await call("GET", `/v1/sessions/${enc("main")}/transcript.jsonl`)).json)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((l) => l.type === "message")
      .map((l) => l.message);
    // Each run: its user message, the tool call, the tool's result, the reply.
    const roles = ["user", "assistant", "toolResult", "assistant"];
    expect(exported.map((m) => m.role)).toEqual([...roles, ...roles]);
    expect(comparable(exported.slice(5))).toEqual(comparable(exported.slice(1, 4)));
    expect(exported[5]).toMatchObject({ api, stopReason: "toolUse", usage: { input: 11, output: 3 } });
    expect(exported[5].usage.cost.total).toBeCloseTo((11 * 3 + 3 * 15) / 1e6, 12);
    expect(exported[5].content).toEqual([
      { type: "toolCall", id: toolCall.toolCallId, name: "agents_list", arguments: {} },
    ]);
    expect(exported[7]).toMatchObject({ api, stopReason: "stop", usage: { input: 11, output: 3 } });
    expect(exported[7].content).toEqual([{ type: "text", text: REPLY }]);
  });
});

describe("the offline builtin model streams only when someone watches as its run starts", () => {
  it("unwatched: answered in one piece (no delta is made), a late watcher gets the ended run's replay; watched: its text in pieces", async () => {
    const deltas = vi.spyOn(RunStreams.prototype, "delta");
    const key = "agent:main:builtin-unwatched";
    const run = await sendAndWait(key, "quietly done");
    expect(run).toMatchObject({ status: "ok", reply: "quietly done" });
    expect(deltas).not.toHaveBeenCalled();
    const late = await openStream(`/v1/runs/${run.runId}/events`);
    expect(await late.sse.rest()).toEqual([
      { id: "ended:1", event: "delta", data: JSON.stringify({ text: "quietly done" }) },
      { id: "ended:2", event: "status", data: JSON.stringify({ status: "ok", reply: "quietly done" }) },
    ]);

    const session = await openStream(`/v1/sessions/${enc(key)}/events`);
    const text = "watched words arrive in pieces";
    expect(await sendAndWait(key, text)).toMatchObject({ status: "ok", reply: text });
    await session.sse.cancel();
    const made = deltas.mock.calls.map(([, piece]) => piece);
    expect(made.length).toBeGreaterThanOrEqual(3);
    expect(made.join("")).toBe(text);
  });
});

/**
 * A streamed chat completion that sends its first pieces and then stalls until the reader cancels it
 * (the AI SDK cancels the body when the run is aborted or reaches its deadline); `fail` answers 400.
 */
function stallingProvider(mode: "stall" | "fail") {
  const state = { calls: [] as any[], cancelled: 0 };
  const original = globalThis.fetch;
  const encoder = new TextEncoder();
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(WIRE_BASE["openai-completions"])) return original(input, init);
    const body = JSON.parse(String(init?.body));
    state.calls.push(body);
    if (mode === "fail")
      return new Response(
        JSON.stringify({ error: { message: "bad request from fake", type: "invalid_request_error" } }),
        { status: 400, headers: { "content-type": "application/json" } },
      );
    const chunk = (content: string) =>
      encoder.encode(
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`,
      );
    const first = [chunk("half "), chunk("way")];
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = first.shift();
        if (next) controller.enqueue(next);
        else await new Promise(() => {}); // stalls: the rest never comes
      },
      cancel() {
        state.cancelled++;
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  });
  return state;
}

/**
 * Watch a run that is stalled after "half way": the first watcher reads until it has that text (live
 * pieces, or the text so far when it joined after them); a second one, joining now, gets it as one delta.
 */
async function watchHalfWay(runId: string) {
  const first = await openStream(`/v1/runs/${runId}/events`);
  const seen: string[] = [];
  while (seen.join("") !== "half way") seen.push(JSON.parse((await first.sse.next())!.data).text);
  const second = await openStream(`/v1/runs/${runId}/events`);
  const [soFar] = await second.sse.takeN(1);
  expect(soFar).toEqual({ id: expect.any(String), event: "delta", data: JSON.stringify({ text: "half way" }) });
  return [first.sse, second.sse];
}

describe("a streamed run fails, aborts and times out with the texts of docs/events.md", () => {
  it("a provider error ends it `error` with the provider's message", async () => {
    useApi("openai-completions", "fails");
    const fake = stallingProvider("fail");
    const run = await sendAndWait("main", "first");
    expect(fake.calls.map((b) => b.stream === true)).toEqual([true]);
    expect(run).toMatchObject({ status: "error", error: expect.stringContaining("bad request from fake") });
  });

  it("abort mid-stream: watchers who joined after the send had the text so far, then `aborted`; the provider stream is cancelled and no reply is kept", async () => {
    useApi("openai-completions", "aborts");
    const fake = stallingProvider("stall");
    const runId = (await call("POST", `/v1/sessions/${enc("main")}/messages`, { message: "one" })).json.runId;
    await vi.waitFor(() => expect(fake.calls).toHaveLength(1));
    expect(fake.calls[0].stream).toBe(true);
    const watchers = await watchHalfWay(runId);
    expect((await call("POST", `/v1/runs/${runId}/abort`)).json).toMatchObject({ status: "aborted" });
    const status = {
      id: expect.any(String),
      event: "status",
      data: JSON.stringify({ status: "aborted", error: "Run aborted" }),
    };
    for (const sse of watchers) expect(await sse.rest()).toEqual([status]);
    await vi.waitFor(() => expect(fake.cancelled).toBe(1));
    const hist = (await call("GET", `/v1/sessions/${enc("main")}/history`)).json.messages;
    expect(hist.map((m: any) => m.stopReason ?? m.role)).toEqual(["user", "aborted"]);
  });

  it("the deadline mid-stream ends it `timeout` with the deadline's error text", async () => {
    setConfigOverride({
      agents: { defaults: { timeoutSeconds: 30 }, list: [{ id: "deadline", default: true, model: "p/m1" }] },
      models: {
        providers: { p: { api: "openai-completions", baseUrl: WIRE_BASE["openai-completions"], apiKey: "k" } },
      },
    });
    const fake = stallingProvider("stall");
    const key = "agent:deadline:main";
    const runId = (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "one" })).json.runId;
    await vi.waitFor(() => expect(fake.calls).toHaveLength(1));
    expect(fake.calls[0].stream).toBe(true);
    const watchers = await watchHalfWay(runId);
    await advance(key, 31_000);
    const status = {
      id: expect.any(String),
      event: "status",
      data: JSON.stringify({ status: "timeout", error: "Run timed out after 30s" }),
    };
    for (const sse of watchers) expect(await sse.rest()).toEqual([status]);
    expect((await call("GET", `/v1/runs/${runId}`)).json).toMatchObject({
      status: "timeout",
      error: "Run timed out after 30s",
    });
    await vi.waitFor(() => expect(fake.cancelled).toBe(1));
  });
});

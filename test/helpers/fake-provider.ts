import { vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { chatCompletionStream, sseResponse } from "./wire-streams";

/**
 * A fake OpenAI-compatible model server (`https://llm.test/v1`), answered from the test: the Worker,
 * its objects and the tests share one isolate, so spying on `fetch` intercepts the runner's calls.
 * Each call is held until the test answers it (or answered at once by `auto`), which lets a test
 * observe what is in flight — one run per session, several sessions at once.
 */
export const FAKE_BASE_URL = "https://llm.test/v1";

export interface FakeCall {
  body: any;
  /** Text of the last user message the model was given. */
  lastUser: string;
  /** The runner cancelled this call (deadline, abort). */
  aborted: boolean;
  settled: boolean;
  reply(text: string, usage?: { prompt: number; completion: number }): void;
  toolCall(name: string, args: unknown, id?: string): void;
  fail(status: number, message: string): void;
}

export function useFakeProvider(opts: { auto?: (call: FakeCall) => void; extraConfig?: Record<string, unknown> } = {}) {
  setConfigOverride({
    agents: {
      list: [
        { id: "main", name: "Main", default: true, model: "fake/m1" },
        { id: "research", name: "Research", model: "fake/m1" },
      ],
    },
    models: { providers: { fake: { baseUrl: FAKE_BASE_URL, apiKey: "k", models: [{ id: "m1" }] } } },
    ...opts.extraConfig,
  });
  const calls: FakeCall[] = [];
  const original = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(FAKE_BASE_URL)) return original(input, init);
    const body = JSON.parse(String(init?.body ?? "{}"));
    const users = (body.messages as any[]).filter((m) => m.role === "user");
    const last = users[users.length - 1]?.content;
    const lastUser =
      typeof last === "string" ? last : Array.isArray(last) ? last.map((p: any) => p.text ?? "").join("") : "";
    // The answer is a plain field set by the test and polled from here: resolving a promise or
    // building a Response from the test's context would cross I/O contexts, which workerd forbids.
    let answer: { response: () => Response } | null = null;
    const signal = init?.signal ?? null;
    const call: FakeCall = {
      body,
      lastUser,
      aborted: false,
      settled: false,
      reply(text, usage = { prompt: 5, completion: 2 }) {
        if (call.settled) return;
        call.settled = true;
        answer = { response: () => completion({ content: text }, "stop", usage, body) };
      },
      toolCall(name, args, id = `call_${calls.length}`) {
        if (call.settled) return;
        call.settled = true;
        answer = {
          response: () =>
            completion(
              { content: null, tool_calls: [{ id, function: { name, arguments: JSON.stringify(args) } }] },
              "tool_calls",
              { prompt: 3, completion: 1 },
              body,
            ),
        };
      },
      fail(status, message) {
        if (call.settled) return;
        call.settled = true;
        answer = {
          response: () =>
            new Response(JSON.stringify({ error: { message, type: "invalid_request_error" } }), {
              status,
              headers: { "content-type": "application/json" },
            }),
        };
      },
    };
    calls.push(call);
    opts.auto?.(call);
    for (;;) {
      if (signal?.aborted) {
        call.aborted = true;
        call.settled = true;
        throw signal.reason ?? new DOMException("aborted", "AbortError");
      }
      const a = answer as { response: () => Response } | null;
      if (a) return a.response();
      await new Promise((r) => setTimeout(r, 2));
    }
  });
  return {
    calls,
    /** Calls not answered yet. */
    pending: () => calls.filter((c) => !c.settled),
    /** After an eviction: the calls of the aborted instances will never be read, forget them. */
    abandonPending: () => {
      for (const c of calls) c.settled = true;
    },
  };
}

/** Several tool calls in one streamed answer (a model calling tools in parallel), each at its own index. */
function parallelToolCallStream(
  calls: { id: string; function: { name: string; arguments: string } }[],
  usage: { prompt: number; completion: number },
  request: { stream_options?: { include_usage?: boolean } },
): Response {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    data: { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices, ...extra },
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) =>
    chunk([{ index: 0, delta: d, finish_reason: finish }]);
  const events = [
    delta({ role: "assistant", content: "" }),
    ...calls.map((c, index) => delta({ tool_calls: [{ index, id: c.id, type: "function", function: c.function }] })),
    delta({}, "tool_calls"),
  ];
  if (request.stream_options?.include_usage) {
    const u = {
      prompt_tokens: usage.prompt,
      completion_tokens: usage.completion,
      total_tokens: usage.prompt + usage.completion,
    };
    events.push(chunk([], { usage: u }));
  }
  return sseResponse([...events, { data: "[DONE]" }]);
}

/**
 * An OpenAI-compatible chat.completion answer (shared by every fake model in the tests): for a request
 * that asked to stream (`stream: true`, as every run does), the same answer as chat.completion.chunk
 * events (test/helpers/wire-streams.ts); otherwise one JSON body.
 */
export function completion(
  message: { content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] },
  finish: string,
  usage: { prompt: number; completion: number },
  request?: { stream?: boolean; stream_options?: { include_usage?: boolean } },
): Response {
  if (request?.stream) {
    const calls = message.tool_calls ?? [];
    if (calls.length > 1) return parallelToolCallStream(calls, usage, request);
    const answer = calls[0]
      ? { tool: calls[0].function.name, args: JSON.parse(calls[0].function.arguments), id: calls[0].id }
      : { text: message.content ?? "" };
    return chatCompletionStream(answer, { input: usage.prompt, output: usage.completion }, request);
  }
  return new Response(
    JSON.stringify({
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 1,
      model: "m1",
      choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
      usage: {
        prompt_tokens: usage.prompt,
        completion_tokens: usage.completion,
        total_tokens: usage.prompt + usage.completion,
      },
    }),
    { headers: { "content-type": "application/json" } },
  );
}

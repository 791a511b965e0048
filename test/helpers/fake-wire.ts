import { vi } from "vitest";
import { completion } from "./fake-provider";
import { anthropicStream, chatCompletionStream, googleStream, responsesStream } from "./wire-streams";

/**
 * In-isolate fakes of the four provider wire formats (models.providers.*.api), each answering from a
 * script with either text or one tool call — streamed when the request asks to stream
 * (test/helpers/wire-streams.ts), one JSON body otherwise — and recording every request. The Worker, its objects
 * and the tests share one isolate, so a spy on `fetch` sees the AI SDK providers' real HTTP requests.
 */
export type WireApi = "openai-completions" | "openai-responses" | "anthropic-messages" | "google-generative-ai";
export type WireAnswer = { text: string } | { tool: string; args: Record<string, unknown> };

export interface WireCall {
  url: string;
  headers: Record<string, string>;
  body: any;
}

export const WIRE_BASE: Record<WireApi, string> = {
  "openai-completions": "https://wire.test/compat/v1",
  "openai-responses": "https://wire.test/openai/v1",
  "anthropic-messages": "https://wire.test/anthropic/v1",
  "google-generative-ai": "https://wire.test/google/v1beta",
};

const json = (body: unknown) => new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

/** The request asked to stream: `stream: true` in the body, or Google's streaming endpoint. */
function wantsStream(api: WireApi, url: string, body: any): boolean {
  return api === "google-generative-ai" ? url.includes(":streamGenerateContent") : body.stream === true;
}

function respond(api: WireApi, a: WireAnswer, n: number, url: string, body: any): Response {
  const usage = { input: 11, output: 3 };
  if (wantsStream(api, url, body)) {
    const answer = "text" in a ? a : { ...a, id: `${api === "anthropic-messages" ? "toolu" : "call"}_${n}` };
    switch (api) {
      case "openai-completions":
        return chatCompletionStream(answer, usage, body);
      case "openai-responses":
        return responsesStream(answer, usage, n);
      case "anthropic-messages":
        return anthropicStream(answer, usage, n);
      case "google-generative-ai":
        return googleStream(answer, usage);
    }
  }
  switch (api) {
    case "openai-completions":
      return "text" in a
        ? completion({ content: a.text }, "stop", { prompt: usage.input, completion: usage.output })
        : completion(
            {
              content: null,
              tool_calls: [{ id: `call_${n}`, function: { name: a.tool, arguments: JSON.stringify(a.args) } }],
            },
            "tool_calls",
            { prompt: usage.input, completion: usage.output },
          );
    case "openai-responses":
      return json({
        id: `resp_${n}`,
        object: "response",
        created_at: 1,
        status: "completed",
        model: "m1",
        incomplete_details: null,
        output:
          "text" in a
            ? [
                {
                  type: "message",
                  id: `msg_${n}`,
                  status: "completed",
                  role: "assistant",
                  content: [{ type: "output_text", text: a.text, annotations: [] }],
                },
              ]
            : [
                {
                  type: "function_call",
                  id: `fc_${n}`,
                  call_id: `call_${n}`,
                  name: a.tool,
                  arguments: JSON.stringify(a.args),
                  status: "completed",
                },
              ],
        usage: {
          input_tokens: usage.input,
          output_tokens: usage.output,
          total_tokens: usage.input + usage.output,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
      });
    case "anthropic-messages":
      return json({
        id: `msg_${n}`,
        type: "message",
        role: "assistant",
        model: "m1",
        content:
          "text" in a
            ? [{ type: "text", text: a.text }]
            : [{ type: "tool_use", id: `toolu_${n}`, name: a.tool, input: a.args }],
        stop_reason: "text" in a ? "end_turn" : "tool_use",
        stop_sequence: null,
        usage: { input_tokens: usage.input, output_tokens: usage.output },
      });
    case "google-generative-ai":
      return json({
        candidates: [
          {
            content: {
              role: "model",
              parts: "text" in a ? [{ text: a.text }] : [{ functionCall: { name: a.tool, args: a.args } }],
            },
            finishReason: "STOP",
            index: 0,
          },
        ],
        usageMetadata: {
          promptTokenCount: usage.input,
          candidatesTokenCount: usage.output,
          totalTokenCount: usage.input + usage.output,
        },
      });
  }
}

/**
 * Fake `api` at WIRE_BASE[api] (or at `base`: a provider's real URL, test/config/openclaw-corpus.test.ts); `script`
 * picks the answer from the call's index and body. With `gate`, each call waits until `gate.open` (a plain
 * field polled from here: settling a promise from the test's context would cross I/O contexts, which
 * workerd forbids), so a test can connect a watcher first.
 */
export function fakeWire(
  api: WireApi,
  script: (n: number, body: any) => WireAnswer,
  gate?: { open: boolean },
  base: string = WIRE_BASE[api],
): WireCall[] {
  const calls: WireCall[] = [];
  const original = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(base)) return original(input, init);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => {
      headers[k] = v;
    });
    const body = JSON.parse(String(init?.body ?? "{}"));
    calls.push({ url, headers, body });
    const n = calls.length;
    while (gate && !gate.open) await new Promise((r) => setTimeout(r, 2));
    return respond(api, script(n - 1, body), n, url, body);
  });
  return calls;
}

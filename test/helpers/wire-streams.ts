/**
 * The streaming wire formats of the provider APIs (what each AI SDK provider parses in `doStream`),
 * built from one answer: text sent in several pieces, or one tool call whose arguments arrive in pieces.
 * Each SSE event is its own body chunk, as a provider flushes them.
 */
export type StreamAnswer = { text: string } | { tool: string; args: Record<string, unknown>; id: string };
export interface StreamUsage {
  input: number;
  output: number;
}

/** `text` in three pieces (two when it is shorter): a watcher sees several deltas. */
export function pieces(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size));
  return out;
}

export function sseResponse(events: { event?: string; data: unknown }[]): Response {
  const encoder = new TextEncoder();
  const blocks = events.map(({ event, data }) => {
    const line = typeof data === "string" ? data : JSON.stringify(data);
    return encoder.encode(`${event ? `event: ${event}\n` : ""}data: ${line}\n\n`);
  });
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = blocks.shift();
      if (next) controller.enqueue(next);
      else controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

/**
 * OpenAI chat completions (`stream: true`): `data: {chunk}` lines and `data: [DONE]`; usage arrives in a
 * last chunk with no choices, and only when the request set `stream_options.include_usage`.
 */
export function chatCompletionStream(
  a: StreamAnswer,
  usage: StreamUsage,
  request: { stream_options?: { include_usage?: boolean } },
): Response {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    data: { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices, ...extra },
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) =>
    chunk([{ index: 0, delta: d, finish_reason: finish }]);
  const events = [delta({ role: "assistant", content: "" })];
  if ("text" in a) for (const p of pieces(a.text)) events.push(delta({ content: p }));
  else {
    events.push(
      delta({ tool_calls: [{ index: 0, id: a.id, type: "function", function: { name: a.tool, arguments: "" } }] }),
    );
    for (const p of pieces(JSON.stringify(a.args)))
      events.push(delta({ tool_calls: [{ index: 0, function: { arguments: p } }] }));
  }
  events.push(delta({}, "text" in a ? "stop" : "tool_calls"));
  if (request.stream_options?.include_usage) {
    const u = { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output };
    events.push(chunk([], { usage: u }));
  }
  return sseResponse([...events, { data: "[DONE]" }]);
}

/** OpenAI Responses (`stream: true`): typed `event:`/`data:` pairs from response.created to response.completed. */
export function responsesStream(a: StreamAnswer, usage: StreamUsage, n: number): Response {
  let seq = 0;
  const ev = (type: string, fields: Record<string, unknown>) => ({
    event: type,
    data: { type, sequence_number: seq++, ...fields },
  });
  const base = { id: `resp_${n}`, object: "response", created_at: 1, model: "m1" };
  const events = [ev("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } })];
  let item: Record<string, unknown>;
  if ("text" in a) {
    const id = `msg_${n}`;
    events.push(
      ev("response.output_item.added", {
        output_index: 0,
        item: { type: "message", id, status: "in_progress", role: "assistant", content: [] },
      }),
    );
    for (const p of pieces(a.text))
      events.push(ev("response.output_text.delta", { item_id: id, output_index: 0, content_index: 0, delta: p }));
    item = {
      type: "message",
      id,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: a.text, annotations: [] }],
    };
  } else {
    const id = `fc_${n}`;
    const args = JSON.stringify(a.args);
    const call = { type: "function_call", id, call_id: a.id, name: a.tool };
    events.push(
      ev("response.output_item.added", { output_index: 0, item: { ...call, arguments: "", status: "in_progress" } }),
    );
    for (const p of pieces(args))
      events.push(ev("response.function_call_arguments.delta", { item_id: id, output_index: 0, delta: p }));
    events.push(ev("response.function_call_arguments.done", { item_id: id, output_index: 0, arguments: args }));
    item = { ...call, arguments: args, status: "completed" };
  }
  events.push(ev("response.output_item.done", { output_index: 0, item }));
  const u = {
    input_tokens: usage.input,
    output_tokens: usage.output,
    total_tokens: usage.input + usage.output,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  };
  events.push(
    ev("response.completed", {
      response: { ...base, status: "completed", incomplete_details: null, output: [item], usage: u },
    }),
  );
  return sseResponse(events);
}

/**
 * Anthropic Messages (`stream: true`): message_start (input tokens), one content block's start, deltas
 * and stop, message_delta (stop reason, output tokens), message_stop.
 */
export function anthropicStream(a: StreamAnswer, usage: StreamUsage, n: number): Response {
  const ev = (type: string, fields: Record<string, unknown> = {}) => ({ event: type, data: { type, ...fields } });
  const message = {
    id: `msg_${n}`,
    type: "message",
    role: "assistant",
    model: "m1",
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: 1 },
  };
  const events = [ev("message_start", { message })];
  if ("text" in a) {
    events.push(ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }));
    for (const p of pieces(a.text))
      events.push(ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: p } }));
  } else {
    events.push(
      ev("content_block_start", { index: 0, content_block: { type: "tool_use", id: a.id, name: a.tool, input: {} } }),
    );
    for (const p of pieces(JSON.stringify(a.args)))
      events.push(ev("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: p } }));
  }
  events.push(ev("content_block_stop", { index: 0 }));
  events.push(
    ev("message_delta", {
      delta: { stop_reason: "text" in a ? "end_turn" : "tool_use", stop_sequence: null },
      usage: { output_tokens: usage.output },
    }),
  );
  events.push(ev("message_stop"));
  return sseResponse(events);
}

/**
 * Google Generative AI (`:streamGenerateContent?alt=sse`): `data:` chunks of GenerateContentResponse, the
 * text in several; the last carries the finish reason and usageMetadata.
 */
export function googleStream(a: StreamAnswer, usage: StreamUsage): Response {
  const chunk = (parts: unknown[], last: boolean) => ({
    data: {
      candidates: [{ content: { role: "model", parts }, index: 0, ...(last ? { finishReason: "STOP" } : {}) }],
      ...(last
        ? {
            usageMetadata: {
              promptTokenCount: usage.input,
              candidatesTokenCount: usage.output,
              totalTokenCount: usage.input + usage.output,
            },
          }
        : {}),
    },
  });
  if (!("text" in a)) return sseResponse([chunk([{ functionCall: { name: a.tool, args: a.args } }], true)]);
  const ps = pieces(a.text);
  return sseResponse(ps.map((p, i) => chunk([{ text: p }], i === ps.length - 1)));
}

/**
 * What the Workers AI binding returns for `run(model, {stream: true})`: a byte stream of `data:` events in
 * the shape of `answer` (the non-streamed answer): Workers AI's own (`response` pieces, `tool_calls`, a
 * last event with `usage`) or the chat-completions chunks of newer models (usage always included).
 */
export function workersAiStream(answer: Record<string, any>): ReadableStream<Uint8Array> {
  const usage = { input: answer.usage.prompt_tokens, output: answer.usage.completion_tokens };
  if (answer.choices) {
    const message = answer.choices[0].message;
    const call = message.tool_calls?.[0];
    const a = call
      ? { tool: call.function.name, args: JSON.parse(call.function.arguments), id: call.id }
      : { text: message.content };
    return chatCompletionStream(a, usage, { stream_options: { include_usage: true } }).body!;
  }
  const events: { data: unknown }[] = pieces(answer.response ?? "").map((p) => ({ data: { response: p } }));
  if (answer.tool_calls) events.push({ data: { response: "", tool_calls: answer.tool_calls } });
  events.push({ data: { response: "", usage: answer.usage } }, { data: "[DONE]" });
  return sseResponse(events).body!;
}

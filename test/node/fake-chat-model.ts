import type { ServerResponse } from "node:http";

/**
 * The "fake/m1" model of the console's browser tests: an OpenAI-compatible chat endpoint, served by the
 * test's own server, whose streamed answer the test writes piece by piece (`write`), then ends (`finish`),
 * so a run stays mid-reply as long as the test needs. `nextReply()` resolves when the Worker's next model
 * request arrives; a request nobody waits for is answered at once.
 */
export interface FakeReply {
  streamed: boolean;
  write(text: string): void;
  finish(): void;
}

export function fakeChatModel() {
  const waiting: ((r: FakeReply) => void)[] = [];
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

  /** Answer one chat-completions request (its parsed body) on `res`. */
  function answer(body: any, res: ServerResponse): void {
    const next = waiting.shift();
    if (!body.stream) {
      // Asked in one piece (docs/events.md says which runs stream): the test sees `streamed: false`.
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "chatcmpl-fake",
          object: "chat.completion",
          created: 1,
          model: "m1",
          choices: [{ index: 0, message: { role: "assistant", content: "not streamed" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
      next?.({ streamed: false, write() {}, finish() {} });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chunk({ role: "assistant", content: "" }));
    const reply: FakeReply = {
      streamed: true,
      write: (text) => void res.write(chunk({ content: text })),
      finish: () => {
        res.write(chunk({}, "stop"));
        const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
        res.write(
          `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices: [], usage })}\n\n`,
        );
        res.end("data: [DONE]\n\n");
      },
    };
    if (next) next(reply);
    else reply.finish();
  }

  return {
    answer,
    nextReply: () => new Promise<FakeReply>((resolve) => waiting.push(resolve)),
  };
}

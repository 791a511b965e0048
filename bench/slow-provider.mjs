// A chat-completions provider on loopback that answers like a remote model: after `delayMs`, streamed. The
// offline `builtin/echo` model answers within a macrotask, so every run a send starts — its reply, its
// announce step, their bookkeeping — lands on the machine while the burst that caused it is still running.
// A real model takes seconds; with this provider the sends' runs wait on the network as they would in production,
// and a burst measures what accepting a send costs (docs/scale.md).
import { createServer } from "node:http";

/** The announce step's user message (src/send/a2a-prompt.ts): answered as a quiet agent does, so nothing is delivered. */
const ANNOUNCE_STEP = "Agent-to-agent announce step.";

function lastUserText(messages) {
  const last = [...(messages ?? [])].reverse().find((m) => m.role === "user");
  if (!last) return "";
  if (typeof last.content === "string") return last.content;
  return (last.content ?? []).map((p) => p.text ?? "").join("");
}

function sseChunks(text, model) {
  const base = { id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model };
  const chunk = (choices, extra = {}) => `data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`;
  return [
    chunk([{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null }]),
    chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
    chunk([], { usage: { prompt_tokens: 10, completion_tokens: Math.ceil(text.length / 4), total_tokens: 0 } }),
    "data: [DONE]\n\n",
  ];
}

/** Start the provider; `requests` counts the model calls it answered. */
export async function startSlowProvider({ port, delayMs }) {
  const stats = { requests: 0 };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => {
      body += d;
    });
    req.on("end", () => {
      setTimeout(() => {
        stats.requests++;
        let parsed = {};
        try {
          parsed = JSON.parse(body);
        } catch {
          // answered below with an empty reply
        }
        const said = lastUserText(parsed.messages);
        const text = said.trim() === ANNOUNCE_STEP ? "ANNOUNCE_SKIP" : said;
        res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
        for (const c of sseChunks(text, parsed.model ?? "slow")) res.write(c);
        res.end();
      }, delayMs);
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  return {
    stats,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    stop: () => new Promise((resolve) => server.close(resolve)),
  };
}

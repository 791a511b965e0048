import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { fakeWire, WIRE_BASE, type WireApi } from "../helpers/fake-wire";
import { call, invoke, sendAndWait } from "../helpers/http";

function useApi(api: WireApi, agent = "main") {
  setConfigOverride({
    agents: { list: [{ id: agent, default: true, model: "p/m1" }] },
    models: { providers: { p: { api, baseUrl: WIRE_BASE[api], apiKey: "key-1", models: [{ id: "m1" }] } } },
  });
}

/** Each API's streaming endpoint: every run on a remote provider streams (src/runners/builtin-run.ts). */
const ENDPOINT: Record<WireApi, string> = {
  "openai-completions": "/chat/completions",
  "openai-responses": "/responses",
  "anthropic-messages": "/messages",
  "google-generative-ai": "/models/m1:streamGenerateContent?alt=sse",
};
const AUTH: Record<WireApi, [string, string]> = {
  "openai-completions": ["authorization", "Bearer key-1"],
  "openai-responses": ["authorization", "Bearer key-1"],
  "anthropic-messages": ["x-api-key", "key-1"],
  "google-generative-ai": ["x-goog-api-key", "key-1"],
};
/** Where each wire format carries the thinking level "high". */
const THINKING: Record<WireApi, (body: any) => unknown> = {
  "openai-completions": (b) => b.reasoning_effort,
  "openai-responses": (b) => b.reasoning?.effort,
  "anthropic-messages": (b) => b.thinking,
  "google-generative-ai": (b) => b.generationConfig?.thinkingConfig?.thinkingBudget,
};
const HIGH: Record<WireApi, unknown> = {
  "openai-completions": "high",
  "openai-responses": "high",
  "anthropic-messages": { type: "enabled", budget_tokens: 16384 },
  "google-generative-ai": 16384,
};

const APIS: WireApi[] = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"];

describe.each(APIS)("provider api %s (through its AI SDK provider, against a fake of its wire format)", (api) => {
  it("answers a run that calls a session tool, then replies; tool call, result and usage are recorded", async () => {
    const agent = `w${APIS.indexOf(api)}`;
    useApi(api, agent);
    const calls = fakeWire(api, (n) => (n === 0 ? { tool: "agents_list", args: {} } : { text: "done" }));
    const run = await sendAndWait("main", "hello there");
    expect(run).toMatchObject({ status: "ok", reply: "done", usage: { input: 22, output: 6 } });
    expect(calls.map((c) => c.url)).toEqual([WIRE_BASE[api] + ENDPOINT[api], WIRE_BASE[api] + ENDPOINT[api]]);
    expect(calls[0].headers[AUTH[api][0]]).toBe(AUTH[api][1]);
    const first = JSON.stringify(calls[0].body);
    expect(first).toContain("hello there");
    expect(first).toContain("agents_list");
    // The second request carries the tool's result back to the model in the wire format.
    expect(JSON.stringify(calls[1].body)).toContain(`requester`);
    const h = await invoke("sessions_history", { sessionKey: "main", includeTools: true });
    const msgs = h.details.messages as any[];
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    expect(msgs[1].content).toEqual([{ type: "toolCall", id: expect.any(String), name: "agents_list", arguments: {} }]);
    expect(msgs[1]).toMatchObject({ api, provider: "p", model: "m1", stopReason: "toolUse" });
    expect(JSON.parse(msgs[2].content[0].text)).toMatchObject({ requester: agent });
    expect(msgs[3].content).toEqual([{ type: "text", text: "done" }]);
  });

  it("PATCH thinkingLevel reaches the model; off sends nothing", async () => {
    useApi(api, `t${APIS.indexOf(api)}`);
    const calls = fakeWire(api, () => ({ text: "ok" }));
    expect((await call("PATCH", "/v1/sessions/main", { thinkingLevel: "HIGH" })).json).toMatchObject({
      thinkingLevel: "high",
    });
    await sendAndWait("main", "think hard");
    expect(THINKING[api](calls[0].body)).toEqual(HIGH[api]);
    await call("PATCH", "/v1/sessions/main", { thinkingLevel: "off" });
    await sendAndWait("main", "no thinking");
    expect(THINKING[api](calls[1].body)).toBeUndefined();
  });
});

describe("thinking levels", () => {
  it("each of OpenClaw's levels maps to reasoning_effort for OpenAI-compatible providers (docs/models.md: xhigh, max, ultra → high; adaptive → medium)", async () => {
    useApi("openai-completions", "levels");
    const calls = fakeWire("openai-completions", () => ({ text: "ok" }));
    const levels = ["minimal", "low", "medium", "high", "xhigh", "max", "ultra", "adaptive"];
    for (const level of levels) {
      await call("PATCH", "/v1/sessions/main", { thinkingLevel: level });
      await sendAndWait("main", level);
    }
    expect(calls.map((c) => c.body.reasoning_effort)).toEqual([
      "minimal",
      "low",
      "medium",
      "high",
      "high",
      "high",
      "high",
      "medium",
    ]);
  });

  it("an unknown thinkingLevel is a 400 naming the field; nothing changes", async () => {
    useApi("openai-completions", "badlevel");
    const r = await call("PATCH", "/v1/sessions/main", { thinkingLevel: "extreme" });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toContain("thinkingLevel");
    expect(r.json.error.message).toContain(
      'Invalid thinking level "extreme". Use one of: off, minimal, low, medium, high, xhigh, adaptive, max, ultra.',
    );
  });
});

describe("provider secrets", () => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: OpenClaw's literal ${NAME} syntax is what is under test
  it("apiKey env:NAME and OpenClaw's ${NAME} read the Worker secret NAME", async () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: OpenClaw's literal ${NAME} syntax is what is under test
    for (const [i, apiKey] of ["env:SIGNING_SECRET", "${SIGNING_SECRET}"].entries()) {
      setConfigOverride({
        agents: { list: [{ id: `sec${i}`, default: true, model: "p/m1" }] },
        models: { providers: { p: { api: "openai-completions", baseUrl: WIRE_BASE["openai-completions"], apiKey } } },
      });
      const calls = fakeWire("openai-completions", () => ({ text: "ok" }));
      await sendAndWait("main", "hi");
      expect(calls[0].headers.authorization).toBe(`Bearer ${env.SIGNING_SECRET}`);
      vi.restoreAllMocks();
    }
  });
});

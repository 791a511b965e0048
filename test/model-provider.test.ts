import { afterEach, expect, it, vi } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { call, sendAndWait } from "./helpers/http";

afterEach(() => {
  setConfigOverride(null);
  vi.restoreAllMocks();
});
it("an OpenAI-compatible provider from models.providers answers runs (through a fake server)", async () => {
  setConfigOverride({
    agents: { list: [{ id: "zed", default: true, model: "fake/m1" }] },
    models: { providers: { fake: { baseUrl: "https://llm.test/v1", apiKey: "k" } } },
  });
  const r = await call("GET", "/healthz");
  expect(r.json.agents).toEqual(["zed"]);
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (_input: any) => {
    return new Response(
      JSON.stringify({
        id: "x",
        object: "chat.completion",
        created: 1,
        model: "m1",
        choices: [{ index: 0, message: { role: "assistant", content: "from fake" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
      }),
      { headers: { "content-type": "application/json" } },
    );
  });
  const run = await sendAndWait("main", "hi");
  expect(run).toMatchObject({ status: "ok", reply: "from fake" });
  expect(spy).toHaveBeenCalled();
});

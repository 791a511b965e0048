import { expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { completion } from "../helpers/fake-provider";
import { call, sendAndWait } from "../helpers/http";

it("an OpenAI-compatible provider from models.providers answers runs (through a fake server)", async () => {
  setConfigOverride({
    agents: { list: [{ id: "zed", default: true, model: "fake/m1" }] },
    models: { providers: { fake: { baseUrl: "https://llm.test/v1", apiKey: "k" } } },
  });
  const r = await call("GET", "/healthz");
  expect(r.json.agents).toEqual(["zed"]);
  const spy = vi
    .spyOn(globalThis, "fetch")
    .mockImplementation(async (_input: any, init?: RequestInit) =>
      completion({ content: "from fake" }, "stop", { prompt: 5, completion: 2 }, JSON.parse(String(init?.body))),
    );
  const run = await sendAndWait("main", "hi");
  expect(run).toMatchObject({ status: "ok", reply: "from fake", usage: { input: 5, output: 2 } });
  expect(spy).toHaveBeenCalled();
});

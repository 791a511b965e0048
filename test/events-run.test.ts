import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { useFakeProvider } from "./helpers/fake-provider";
import { call, enc, RESEARCH_TOKEN, sendAndWait } from "./helpers/http";
import { openStream } from "./helpers/sse";

afterEach(() => {
  vi.restoreAllMocks();
  setConfigOverride(null);
});

async function post(key: string, message: string): Promise<string> {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message });
  expect(r.status).toBe(202);
  return r.json.runId;
}

describe("GET /v1/runs/{runId}/events", () => {
  it("streams a run's text while the model generates it, then its final status, and closes", async () => {
    // A first run held by a fake provider keeps the second queued while its watcher connects.
    const fake = useFakeProvider();
    const key = "agent:main:run-events-live";
    const held = await post(key, "hold");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { model: "builtin/echo" })).status).toBe(200);
    const text = "streamed words arrive in pieces";
    const runId = await post(key, text);
    const { res, sse } = await openStream(`/v1/runs/${runId}/events`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    fake.pending()[0].reply("held reply");

    const events = await sse.rest();
    const deltas = events.filter((e) => e.event === "delta").map((e) => JSON.parse(e.data).text);
    // The builtin model streams in several pieces; each reached the watcher before the final status.
    expect(deltas.length).toBeGreaterThanOrEqual(3);
    expect(deltas.join("")).toBe(text);
    expect(events.map((e) => e.event)).toEqual([...deltas.map(() => "delta"), "status"]);
    expect(JSON.parse(events.at(-1)!.data)).toEqual({ status: "ok", reply: text });
    expect(events.every((e) => e.id === undefined)).toBe(true);
    expect((await call("GET", `/v1/runs/${held}`)).json.status).toBe("ok");
  });

  it("a run that already ended replays its reply as one delta, then its status, and closes", async () => {
    const key = "agent:main:run-events-ended";
    const run = await sendAndWait(key, "all done");
    const { sse } = await openStream(`/v1/runs/${run.runId}/events`);
    expect(await sse.rest()).toEqual([
      { event: "delta", data: JSON.stringify({ text: "all done" }) },
      { event: "status", data: JSON.stringify({ status: "ok", reply: "all done" }) },
    ]);
  });

  it("a run aborted while watched ends its stream with its status (no text was generated)", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:run-events-aborted";
    const runId = await post(key, "never answered");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const { sse } = await openStream(`/v1/runs/${runId}/events`);
    expect((await call("POST", `/v1/runs/${runId}/abort`)).status).toBe(200);
    expect(await sse.rest()).toEqual([
      { event: "status", data: JSON.stringify({ status: "aborted", error: "Run aborted" }) },
    ]);
  });

  it("a caller who may not read the run's session gets 403 and no stream; an unknown run is a 404", async () => {
    const key = "agent:main:run-events-private";
    const run = await sendAndWait(key, "private");
    const denied = await call("GET", `/v1/runs/${run.runId}/events`, undefined, { token: RESEARCH_TOKEN });
    expect(denied.status).toBe(403);
    expect(denied.json.ok).toBe(false);
    const unknown = await call("GET", `/v1/runs/${run.runId.replace(/^[0-9a-f]/, "0")}x/events`);
    expect(unknown.status).toBe(404);
  });
});

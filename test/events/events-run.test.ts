import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { EVENT_LIMITS } from "../../src/events/limits";
import type { SessionObject } from "../../src/session/session-object";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { openStream } from "../helpers/sse";
import { pieces } from "../helpers/wire-streams";

const DEFAULTS = { ...EVENT_LIMITS };
afterEach(() => {
  Object.assign(EVENT_LIMITS, DEFAULTS);
});

const textOf = (e: { data: string }) => JSON.parse(e.data).text;

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
    // Ids: one incarnation (this instance's record of the run), numbered 1, 2, … in stream order.
    const incarnation = events[0].id!.split(":")[0];
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => `${incarnation}:${i + 1}`));
    expect((await call("GET", `/v1/runs/${held}`)).json.status).toBe("ok");
  });

  it("a run that already ended replays its reply as one delta, then its status, and closes", async () => {
    const key = "agent:main:run-events-ended";
    const run = await sendAndWait(key, "all done");
    const { sse } = await openStream(`/v1/runs/${run.runId}/events`);
    expect(await sse.rest()).toEqual([
      { id: "ended:1", event: "delta", data: JSON.stringify({ text: "all done" }) },
      { id: "ended:2", event: "status", data: JSON.stringify({ status: "ok", reply: "all done" }) },
    ]);
  });

  it("a run that already ended, resumed: after its own ids only the rest; after an id of the live stream a reset, then the whole reply", async () => {
    const key = "agent:main:run-events-ended-resume";
    const run = await sendAndWait(key, "done twice");
    const afterDelta = await openStream(`/v1/runs/${run.runId}/events`, { headers: { "Last-Event-ID": "ended:1" } });
    expect(await afterDelta.sse.rest()).toEqual([
      { id: "ended:2", event: "status", data: JSON.stringify({ status: "ok", reply: "done twice" }) },
    ]);
    // A client that saw part of the live text (its record is gone with the run's end) starts over.
    const stale = await openStream(`/v1/runs/${run.runId}/events?lastEventId=0a1b2c3d4e5f:3`);
    expect(await stale.sse.rest()).toEqual([
      { event: "reset", data: JSON.stringify({ lastEventId: "0a1b2c3d4e5f:3" }) },
      { id: "ended:1", event: "delta", data: JSON.stringify({ text: "done twice" }) },
      { id: "ended:2", event: "status", data: JSON.stringify({ status: "ok", reply: "done twice" }) },
    ]);
  });

  it("resumes a running run by Last-Event-ID without repeats; from further back than is kept, or another incarnation: reset, then the text so far", async () => {
    EVENT_LIMITS.runReplayEvents = 3;
    const fake = useFakeProvider();
    const key = "agent:main:run-events-resume";
    const runId = await post(key, "hold");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    // Deltas as a streaming model would produce them, while the fake provider holds its own answer.
    const generate = (text: string) =>
      runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta(runId, text));

    const first = await openStream(`/v1/runs/${runId}/events`);
    await generate("Hel");
    await generate("lo");
    const seen = await first.sse.takeN(2);
    await first.sse.cancel();
    const incarnation = seen[0].id!.split(":")[0];
    expect(seen.map((e) => e.id)).toEqual([`${incarnation}:1`, `${incarnation}:2`]);

    // Generated while nobody watched; the reconnect gets exactly those, then continues live.
    await generate(" wor");
    await generate("ld");
    const again = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": seen[1].id! } });
    const resumed = await again.sse.takeN(2);
    expect(resumed.map(textOf)).toEqual([" wor", "ld"]);
    expect(resumed.map((e) => e.id)).toEqual([`${incarnation}:3`, `${incarnation}:4`]);
    await generate("!");
    expect((await again.sse.takeN(1)).map((e) => [e.id, textOf(e)])).toEqual([[`${incarnation}:5`, "!"]]);

    // Event 2 is no longer kept (3 are: 3, 4, 5): a reset, then the text so far as one delta with the newest id.
    const tooOld = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": seen[0].id! } });
    const soFar = { id: `${incarnation}:5`, event: "delta", data: JSON.stringify({ text: "Hello world!" }) };
    expect(await tooOld.sse.takeN(2)).toEqual([
      { event: "reset", data: JSON.stringify({ lastEventId: seen[0].id }) },
      soFar,
    ]);
    // An id of another record of the run (kept by an instance that has since restarted) is never a position here.
    const foreign = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": "0a1b2c3d4e5f:4" } });
    expect(await foreign.sse.takeN(2)).toEqual([
      { event: "reset", data: JSON.stringify({ lastEventId: "0a1b2c3d4e5f:4" }) },
      soFar,
    ]);

    // The model's own streamed answer (it is remote, so it streams) continues the ids.
    fake.pending()[0].reply("Hello world!");
    const rest = [
      ...pieces("Hello world!").map((text, i) => ({
        id: `${incarnation}:${6 + i}`,
        event: "delta",
        data: JSON.stringify({ text }),
      })),
      { id: `${incarnation}:9`, event: "status", data: JSON.stringify({ status: "ok", reply: "Hello world!" }) },
    ];
    for (const w of [again, tooOld, foreign]) expect(await w.sse.rest()).toEqual(rest);
  });

  it("what is kept of a running run's stream is bounded in characters too: a resume behind it gets reset and the text so far", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:run-events-kept-chars";
    const runId = await post(key, "hold");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const piece = (c: string) => c.repeat(40);
    const watcher = await openStream(`/v1/runs/${runId}/events`);
    // Each delta's block is about 90 characters: with 100 kept, only the newest is.
    EVENT_LIMITS.runReplayChars = 100;
    for (const c of ["a", "b", "c"])
      await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta(runId, piece(c)));
    const ids = (await watcher.sse.takeN(3)).map((e) => e.id!);
    await watcher.sse.cancel();
    const fromSecond = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": ids[1] } });
    expect((await fromSecond.sse.takeN(1)).map(textOf)).toEqual([piece("c")]);
    const fromFirst = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": ids[0] } });
    expect(await fromFirst.sse.takeN(2)).toEqual([
      { event: "reset", data: JSON.stringify({ lastEventId: ids[0] }) },
      { id: ids[2], event: "delta", data: JSON.stringify({ text: piece("a") + piece("b") + piece("c") }) },
    ]);
    fake.pending()[0].reply("done");
    await fromSecond.sse.rest();
    await fromFirst.sse.rest();
  });

  it("records of runs are capped (late deltas of an aborted run cannot pile up): past the cap the oldest record goes, and its resume gets reset", async () => {
    EVENT_LIMITS.runRecords = 1;
    const fake = useFakeProvider();
    const key = "agent:main:run-events-records";
    const runId = await post(key, "hold");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const watcher = await openStream(`/v1/runs/${runId}/events`);
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta(runId, "kept"));
    const [seen] = await watcher.sse.takeN(1);
    await watcher.sse.cancel();
    // A delta of another run (say, one aborted moments ago) opens a second record: the first one is dropped.
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta("a-late-run", "stray"));
    const again = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": seen.id! } });
    expect(await again.sse.takeN(1)).toEqual([{ event: "reset", data: JSON.stringify({ lastEventId: seen.id }) }]);
    fake.pending()[0].reply("done");
    expect((await again.sse.rest()).map((e) => e.event)).toEqual([...pieces("done").map(() => "delta"), "status"]);
  });

  it("after the session object restarts mid-run, a resume id of the lost instance gets reset (ids restarted with the new instance's record)", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:run-events-evicted";
    const runId = await post(key, "hold");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const watcher = await openStream(`/v1/runs/${runId}/events`);
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta(runId, "before"));
    const [seen] = await watcher.sse.takeN(1);
    await watcher.sse.cancel();
    // The instance is lost with its executor (as on an eviction or restart); its held model call too.
    await crash(sessionStub(key));
    fake.abandonPending();
    // The run is still `running` in SQLite (its lease timer will notice the lost executor); the new
    // instance's record of it starts again at 1 under a new incarnation.
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.events.runs.delta(runId, "after"));
    const again = await openStream(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": seen.id! } });
    const [reset, soFar] = await again.sse.takeN(2);
    expect(reset).toEqual({ event: "reset", data: JSON.stringify({ lastEventId: seen.id }) });
    expect(soFar.event).toBe("delta");
    expect(textOf(soFar)).toBe("after");
    expect(soFar.id).toMatch(/^[0-9a-f]{12}:1$/);
    expect(soFar.id).not.toBe(seen.id);
    await again.sse.cancel();
  });

  it("a run aborted while watched ends its stream with its status (no text was generated)", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:run-events-aborted";
    const runId = await post(key, "never answered");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const { sse } = await openStream(`/v1/runs/${runId}/events`);
    expect((await call("POST", `/v1/runs/${runId}/abort`)).status).toBe(200);
    expect(await sse.rest()).toEqual([
      { id: "ended:2", event: "status", data: JSON.stringify({ status: "aborted", error: "Run aborted" }) },
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

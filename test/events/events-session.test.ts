import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { heartbeatTimer } from "../../src/events/heartbeat-timer";
import { EVENT_LIMITS } from "../../src/events/limits";
import type { SessionObject } from "../../src/session/session-object";
import { call, enc, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";
import { openStream, type SseEvent } from "../helpers/sse";

const DEFAULTS = { ...EVENT_LIMITS };
const REAL_HEARTBEAT = { ...heartbeatTimer };
afterEach(() => {
  Object.assign(EVENT_LIMITS, DEFAULTS);
  Object.assign(heartbeatTimer, REAL_HEARTBEAT);
});

/**
 * Heartbeats driven by the test instead of wall time: `elapse()` is one interval passing for every running
 * heartbeat. Each heartbeat's loop is started by the bridge, so it runs in the stream's own request and its
 * ping may write to the response (vitest's fake timers would fire it in the test's context, which workerd
 * refuses).
 */
function drivenHeartbeats() {
  const intervals: number[] = [];
  let running = 0;
  let pass = () => {};
  let passed = new Promise<void>((r) => {
    pass = r;
  });
  heartbeatTimer.every = (ms, beat) => {
    intervals.push(ms);
    running++;
    let stopped = false;
    (async () => {
      for (;;) {
        await passed;
        if (stopped) return;
        beat();
      }
    })();
    return () => {
      if (!stopped) running--;
      stopped = true;
    };
  };
  return {
    intervals,
    running: () => running,
    elapse() {
      const release = pass;
      passed = new Promise<void>((r) => {
        pass = r;
      });
      release();
    },
  };
}
/** The position an (opaque) event id stands for within its incarnation: `<sessionId>:<seq>` (src/events/event-ids.ts). */
const seqOf = (id: string | undefined) => Number(id?.split(":").at(-1));
/** The session's current `sessionId`, which event ids carry. */
async function sessionIdOf(key: string): Promise<string> {
  const r = await call("GET", `/v1/sessions/${enc(key)}/history?limit=1`);
  return r.json.sessionId;
}

const summary = (e: SseEvent) => {
  const d = JSON.parse(e.data);
  if (e.event === "run") return `run:${d.status}`;
  if (e.event === "message") return `message:${d.role}:${JSON.stringify(d.content)}`;
  return `${e.event}:${d.status}`;
};

/** The five events one echoed message produces on its session's stream. */
const echoed = (text: string) => [
  "run:queued",
  "run:running",
  `message:user:[{"type":"text","text":"${text}"}]`,
  `message:assistant:[{"type":"text","text":"${text}"}]`,
  "run:ok",
];

describe("GET /v1/sessions/{key}/events", () => {
  it("streams a session's transcript appends and run changes, each with the next seq as its id", async () => {
    const key = "agent:main:events-basic";
    await sendAndWait(key, "first");
    const { res, sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const run = await sendAndWait(key, "hello there");
    const events = await sse.takeN(5);
    expect(events.map(summary)).toEqual(echoed("hello there"));
    // Live from the moment of the request: the first send's five events are not replayed.
    expect(events.map((e) => seqOf(e.id))).toEqual([6, 7, 8, 9, 10]);
    expect(JSON.parse(events[4].data)).toMatchObject({ runId: run.runId, status: "ok", kind: "inbound" });
    const assistant = JSON.parse(events[3].data);
    expect(assistant.__switchboard).toEqual({ seq: 4, runId: run.runId });
    // The same message as sessions_history shows it.
    const history = await call("GET", `/v1/sessions/${enc(key)}/history?includeTools=true`);
    expect(history.json.messages[3]).toMatchObject({ role: "assistant", content: assistant.content });
    await sse.cancel();
  });

  it("an event recorded in a transaction that rolls back never reaches a watcher (its seq is handed out again)", async () => {
    const key = "agent:main:events-rollback";
    await sendAndWait(key, "first");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    await runInDurableObject(sessionStub(key), (obj: SessionObject, state) => {
      expect(() =>
        state.storage.transactionSync(() => {
          obj.events.delivery({
            id: "ghost",
            status: "dead",
            kind: "announce",
            channel: "x",
            attempts: 1,
            error: null,
          });
          throw new Error("rolled back");
        }),
      ).toThrow("rolled back");
    });
    await sendAndWait(key, "second");
    const events = await sse.takeN(5);
    expect(events.map(summary)).toEqual(echoed("second"));
    // The rolled-back event's seq (6) went to the next real event, sent once.
    expect(events.map((e) => seqOf(e.id))).toEqual([6, 7, 8, 9, 10]);
    await sse.cancel();
  });

  it("resumes by Last-Event-ID with nothing missed or repeated across an eviction of the session object", async () => {
    const key = "agent:main:events-resume";
    await sendAndWait(key, "one");
    const first = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": "0" } });
    const seen = await first.sse.takeN(5);
    expect(seen.map(summary)).toEqual(echoed("one"));
    await first.sse.cancel();
    const lastId = seen[4].id!;

    // While nobody watches: one send, an eviction, another send.
    await sendAndWait(key, "two");
    await evictDurableObject(sessionStub(key));
    await sendAndWait(key, "three");

    const again = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": lastId } });
    const replayed = await again.sse.takeN(10);
    expect(replayed.map(summary)).toEqual([...echoed("two"), ...echoed("three")]);
    expect(replayed.map((e) => seqOf(e.id))).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    // Still connected across a second eviction (the socket hibernates with its resume point), then live.
    await evictDurableObject(sessionStub(key));
    await sendAndWait(key, "four");
    const live = await again.sse.takeN(5);
    expect(live.map(summary)).toEqual(echoed("four"));
    expect(live.map((e) => seqOf(e.id))).toEqual([16, 17, 18, 19, 20]);
    await again.sse.cancel();
  });

  it("replays in bounded pages: a resume across more than one page still gets every event once, in order", async () => {
    EVENT_LIMITS.replayPageEvents = 3;
    const key = "agent:main:events-pages";
    for (const t of ["a", "b", "c"]) await sendAndWait(key, t);
    const from = `${await sessionIdOf(key)}:2`;
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events?lastEventId=${enc(from)}`);
    const events = await sse.takeN(13);
    expect(events.map((e) => seqOf(e.id))).toEqual(Array.from({ length: 13 }, (_, i) => i + 3));
    expect(events.map(summary).slice(-5)).toEqual(echoed("c"));
    await sendAndWait(key, "d");
    expect((await sse.takeN(5)).map(summary)).toEqual(echoed("d"));
    await sse.cancel();
  });

  it("a resume point older than what is retained starts with a gap event, then the oldest retained event", async () => {
    EVENT_LIMITS.retainedEvents = 4;
    const key = "agent:main:events-gap";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": "0" } });
    const [gap, ...rest] = await sse.takeN(5);
    const oldestId = `${await sessionIdOf(key)}:2`;
    expect(gap).toEqual({ event: "gap", data: JSON.stringify({ lastEventId: "0", oldestId }) });
    expect(rest.map((e) => seqOf(e.id))).toEqual([2, 3, 4, 5]);
    await sse.cancel();
  });

  it("100 concurrent watchers of one session all receive every event", async () => {
    const key = "agent:main:events-fanout";
    await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "fan-out" });
    const watchers = await Promise.all(
      Array.from({ length: 100 }, () => openStream(`/v1/sessions/${enc(key)}/events`)),
    );
    expect(watchers.every((w) => w.res.status === 200)).toBe(true);
    for (const t of ["m1", "m2", "m3"]) await sendAndWait(key, t);
    const all = await Promise.all(watchers.map((w) => w.sse.takeN(15)));
    const expected = [...echoed("m1"), ...echoed("m2"), ...echoed("m3")];
    for (const got of all) {
      expect(got.map(summary)).toEqual(expected);
      expect(got.map((e) => seqOf(e.id))).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    }
    await Promise.all(watchers.map((w) => w.sse.cancel()));
  });

  it("watchers per session are bounded: one over the limit is a 429 envelope and no stream", async () => {
    EVENT_LIMITS.maxWatchersPerSession = 2;
    const key = "agent:main:events-cap";
    await sendAndWait(key, "x");
    const a = await openStream(`/v1/sessions/${enc(key)}/events`);
    const b = await openStream(`/v1/sessions/${enc(key)}/events`);
    const c = await call("GET", `/v1/sessions/${enc(key)}/events`);
    expect(c.status).toBe(429);
    expect(c.json).toEqual({
      ok: false,
      error: {
        type: "rate_limited",
        message: "Too many watchers of this session (at most 2, docs/limits.md); close one and retry.",
      },
    });
    await a.sse.cancel();
    await b.sse.cancel();
  });

  it("a slow reader is dropped once its buffer passes the byte bound; a reader that keeps up gets everything", async () => {
    EVENT_LIMITS.watcherBufferBytes = 8 * 1024;
    const key = "agent:main:events-slow";
    await sendAndWait(key, "x");
    const slow = await openStream(`/v1/sessions/${enc(key)}/events`);
    const fast = await openStream(`/v1/sessions/${enc(key)}/events`);
    const big = "y".repeat(3000);
    const fastGot: SseEvent[] = [];
    for (let i = 0; i < 20; i++) {
      await sendAndWait(key, `${i} ${big}`);
      fastGot.push(...(await fast.sse.takeN(5)));
    }
    expect(fastGot).toHaveLength(100);
    // The slow reader gets what was buffered before it was dropped, then the end of the stream.
    const slowGot = await slow.sse.rest();
    expect(slowGot.length).toBeLessThan(100);
    expect(slowGot.map((e) => e.id)).toEqual(fastGot.slice(0, slowGot.length).map((e) => e.id));
    await fast.sse.cancel();
  });

  it("sends a `: ping` heartbeat every 15 s on an idle stream, and stops it when the stream ends", async () => {
    const timer = drivenHeartbeats();
    const key = "agent:main:events-ping";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    expect(timer.intervals).toEqual([15_000]);
    // No interval passed yet: the next thing on the stream is this event, not a ping.
    await sendAndWait(key, "y");
    expect((await sse.takeN(5)).map(summary)).toEqual(echoed("y"));
    expect(sse.comments).toEqual([]);
    timer.elapse();
    expect(await sse.nextComment()).toBe("ping");
    timer.elapse();
    expect(await sse.nextComment()).toBe("ping");
    expect(sse.comments).toEqual(["ping", "ping"]);
    expect(timer.running()).toBe(1);
    await sse.cancel();
    await expect.poll(timer.running).toBe(0);
  });

  it("reports delivery state changes", async () => {
    const key = "agent:main:events-delivery";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    await sendAndWait(key, "out", { channel: "nowhere", to: "u1", deliver: true });
    const events = await sse.takeN(6);
    const delivery = events.find((e) => e.event === "delivery")!;
    expect(JSON.parse(delivery.data)).toMatchObject({
      status: "dead",
      kind: "reply",
      channel: "nowhere",
      attempts: 0,
      error: expect.stringContaining("nowhere"),
    });
    await sse.cancel();
  });

  it("a caller who may not read the session gets the error envelope and no stream; unknown session 404; bad id 400", async () => {
    const key = "agent:main:events-private";
    await sendAndWait(key, "secret");
    const denied = await call("GET", `/v1/sessions/${enc(key)}/events`, undefined, { token: RESEARCH_TOKEN });
    expect(denied.status).toBe(403);
    expect(denied.headers.get("content-type")).toContain("application/json");
    expect(denied.json.ok).toBe(false);
    const unknown = await call("GET", `/v1/sessions/${enc("agent:main:events-none")}/events`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.type).toBe("not_found");
    const bad = await call("GET", `/v1/sessions/${enc(key)}/events`, undefined, { headers: { "Last-Event-ID": "x1" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("Last-Event-ID");
  });
});

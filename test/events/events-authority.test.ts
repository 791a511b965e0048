import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { heartbeatTimer } from "../../src/events/heartbeat-timer";
import { installFakeRuntime, runPosts } from "../helpers/fake-runtime";
import { call, enc, sendAndWait } from "../helpers/http";
import { until } from "../helpers/scripted";
import { openStream } from "../helpers/sse";

/**
 * Streams end when their authority ends (docs/events.md): a stream opened with a run token ends (`end`,
 * `token_expired`) when that run does, and every stream ends at its maximum lifetime (`end`, `lifetime`),
 * after which the client resumes with `Last-Event-ID` and is authorized again.
 */

const REAL_TIMER = { ...heartbeatTimer };
beforeEach(() => installFakeRuntime({ defaults: {} }));
afterEach(() => {
  Object.assign(heartbeatTimer, REAL_TIMER);
});

/** A stream's maximum lifetime, passed when the test says so (in the stream's own request, as heartbeats are). */
function drivenLifetime(): { pass: () => void; asked: number[] } {
  const asked: number[] = [];
  let pass = () => {};
  const passed = new Promise<void>((r) => {
    pass = r;
  });
  heartbeatTimer.after = (ms, fire) => {
    asked.push(ms);
    let cancelled = false;
    void passed.then(() => {
      if (!cancelled) fire();
    });
    return () => {
      cancelled = true;
    };
  };
  return { pass: () => pass(), asked };
}

describe("streams end when their authority ends", () => {
  it("a session stream opened with a run token ends with `end: token_expired` when that run ends", async () => {
    const key = `agent:hook:streams-${crypto.randomUUID().slice(0, 8)}`;
    const runId = (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "work" })).json.runId;
    await until(async () => expect(runPosts()).toHaveLength(1));
    const token = runPosts()[0].runToken;
    const { res, sse } = await openStream(`/v1/sessions/${enc(key)}/events`, { token });
    expect(res.status).toBe(200);
    // An operator's stream of the same session goes on.
    const operator = await openStream(`/v1/sessions/${enc(key)}/events`);

    await call("POST", `/v1/runs/${runId}/complete`, { reply: "done" }, { token });
    const events = await sse.rest();
    expect(events.at(-1)).toEqual({ event: "end", data: JSON.stringify({ reason: "token_expired" }) });
    expect(events.filter((e) => e.event === "run").map((e) => JSON.parse(e.data).status)).toContain("ok");

    // The token is refused for a new stream, and the operator's stream still delivers.
    expect((await call("GET", `/v1/sessions/${enc(key)}/events`, undefined, { token })).status).toBe(401);
    await sendAndWait(key.replace("agent:hook:", "agent:main:"), "elsewhere");
    await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "still watched" });
    const next = await operator.sse.next();
    expect(next?.event).toBeDefined();
    await operator.sse.cancel();
  });

  it("every stream ends at its maximum lifetime with `end: lifetime`; resuming with Last-Event-ID loses nothing", async () => {
    const lifetime = drivenLifetime();
    const key = `agent:main:lifetime-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(key, "one");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": "0" } });
    const first = await sse.takeN(2);
    expect(lifetime.asked).toEqual([15 * 60_000]);
    lifetime.pass();
    const rest = await sse.rest();
    expect(rest.at(-1)).toEqual({ event: "end", data: JSON.stringify({ reason: "lifetime" }) });
    const lastId = [...first, ...rest].filter((e) => e.id).at(-1)!.id!;

    Object.assign(heartbeatTimer, REAL_TIMER);
    await sendAndWait(key, "two");
    const resumed = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": lastId } });
    const after = await resumed.sse.takeN(1);
    expect(Number(after[0].id!.split(":")[1])).toBe(Number(lastId.split(":")[1]) + 1);
    await resumed.sse.cancel();
  });

  it("a run of a session whose key is long streams (its socket tag stays under 256 characters)", async () => {
    const key = `agent:main:${"k".repeat(300)}`;
    const run = await sendAndWait(key, "long key");
    expect(run.status).toBe("ok");
    const { res, sse } = await openStream(`/v1/runs/${run.runId}/events`);
    expect(res.status).toBe(200);
    expect((await sse.rest()).map((e) => e.event)).toEqual(["delta", "status"]);
  });
});

import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { SessionObject } from "../../src/session/session-object";
import { call, enc, sessionStub } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";
import { crash } from "../helpers/restart";
import { deferred, installFakes, useOneAgent } from "../helpers/scripted";

/**
 * A send's run starts just after the send is answered (src/session/enqueue.ts); the send's own transaction
 * makes that start durable.
 */

describe("a send's run after an eviction before its start", () => {
  it("is started by the alarm at once: the send's transaction leaves the queue's timer due now", async () => {
    useOneAgent("evicted");
    const models: string[] = [];
    installFakes((c) => {
      models.push(c.lastUser);
      return "done";
    });
    const key = "agent:evicted:chat";
    const { runId, pumpDue, answeredAt } = await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      // The instance dies before its deferred start: that start never happens. (A plain function, not a vitest
      // spy: the dead instance's timer may still call it after the eviction, outside any test.)
      obj.kick = () => {};
      const run = await obj.enqueue({ input: { kind: "inbound", message: "hello" } });
      return { runId: run.runId, pumpDue: obj.timers.get("pump", "queue")?.due_at, answeredAt: Date.now() };
    });
    // Due by the time the send was answered (not a lease later). A bound of a few ms after the call began
    // failed now and then on a loaded machine: the clock moves with the send's own storage work.
    expect(pumpDue).toBeLessThanOrEqual(answeredAt);
    await crash(sessionStub(key));
    // No timer moved: the alarm that is due already is what starts the run on a fresh instance.
    expect(await runDurableObjectAlarm(sessionStub(key))).toBe(true);
    const ended = await call("GET", `/v1/runs/${enc(runId)}/wait?timeoutMs=10000`);
    expect(ended.json).toMatchObject({ status: "ok", reply: "done" });
    expect(models).toEqual(["hello"]);
    await quiesce();
  });

  it("starts once when the deferred start and the alarm both try: the claim takes a queued run only while none runs", async () => {
    useOneAgent("twice");
    const held = deferred<string>();
    let calls = 0;
    installFakes(() => {
      calls++;
      return held.promise;
    });
    const key = "agent:twice:chat";
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hello" });
    expect(r.status).toBe(202);
    await runDurableObjectAlarm(sessionStub(key));
    await vi.waitFor(async () =>
      expect((await call("GET", `/v1/runs/${enc(r.json.runId)}`)).json.status).toBe("running"),
    );
    await runDurableObjectAlarm(sessionStub(key));
    expect(calls).toBe(1);
    // Once claimed, the queue's timer is a late safety net again: no alarm is due for it.
    const pump = await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.timers.get("pump", "queue"));
    expect(pump?.due_at).toBeGreaterThan(Date.now() + 30_000);
    held.resolve("done");
    const ended = await call("GET", `/v1/runs/${enc(r.json.runId)}/wait?timeoutMs=10000`);
    expect(ended.json).toMatchObject({ status: "ok", reply: "done" });
    expect(calls).toBe(1);
    await quiesce();
  });
});

import { abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig, setConfigOverride } from "../src/config/load";
import type { SessionObject } from "../src/session/session-object";
import { call, enc, sessionStub } from "./helpers/http";
import { quiesce } from "./helpers/quiesce";
import { deferred, installFakes, useOneAgent } from "./helpers/scripted";

/**
 * A send's run starts just after the send is answered (src/session/enqueue.ts); the send's own transaction
 * makes that start durable. Its own file: it evicts every object, which the other send-path tests must not see.
 */

afterEach(() => {
  setConfigOverride(null);
  vi.restoreAllMocks();
});

describe("a send's run after an eviction before its start", () => {
  it("is started by the alarm at once: the send's transaction leaves the queue's timer due now", async () => {
    useOneAgent("evicted");
    loadConfig(env); // the config's first parse (a few ms, once per isolate) is not part of the send
    const models: string[] = [];
    installFakes((c) => {
      models.push(c.lastUser);
      return "done";
    });
    const key = "agent:evicted:chat";
    const { runId, pumpDue, sentAt } = await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      // The instance dies before its deferred start: that start never happens. (A plain function, not a vitest
      // spy: the dead instance's timer may still call it after the eviction, outside any test.)
      obj.kick = () => {};
      const sentAt = Date.now();
      const run = await obj.enqueue({ input: { kind: "inbound", message: "hello" } });
      return { runId: run.runId, pumpDue: obj.timers.get("pump", "queue")?.due_at, sentAt };
    });
    expect(pumpDue).toBeLessThanOrEqual(sentAt + 5);
    await abortAllDurableObjects();
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

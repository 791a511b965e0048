import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import type { SessionObject } from "../../src/session/session-object";
import { call, enc, sessionStub } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";
import { evict } from "../helpers/restart";
import { deferred, installFakes, useOneAgent } from "../helpers/scripted";

/** Timers.arm remembers the alarm it set (src/session/timers.ts): storage is touched only when the earliest timer moves. */

describe("the alarm is armed from memory", () => {
  it("messages into a busy session that leave the earliest timer where it was do not touch the alarm", async () => {
    useOneAgent("armed");
    const held = deferred<string>();
    installFakes(() => held.promise);
    const key = "agent:armed:busy";
    const first = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "first" });
    expect(first.status).toBe(202);
    // The session is busy once its first run is running, which a 202 alone does not promise.
    await vi.waitFor(async () =>
      expect((await call("GET", `/v1/runs/${enc(first.json.runId)}`)).json.status).toBe("running"),
    );
    const seen = await runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) => {
      const calls: string[] = [];
      for (const m of ["getAlarm", "setAlarm", "deleteAlarm"] as const) {
        const original = state.storage[m].bind(state.storage) as (...a: unknown[]) => Promise<unknown>;
        vi.spyOn(state.storage, m).mockImplementation(((...a: unknown[]) => {
          calls.push(m);
          return original(...a);
        }) as never);
      }
      return calls;
    });
    for (let i = 0; i < 5; i++)
      expect((await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: `more ${i}` })).status).toBe(202);
    // The second message's index timer may become the earliest (one set); after that nothing moves.
    expect(seen.filter((m) => m === "getAlarm")).toEqual([]);
    expect(seen.filter((m) => m === "setAlarm").length).toBeLessThanOrEqual(1);
    const [alarm, earliest] = await runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) => [
      await state.storage.getAlarm(),
      state.storage.sql.exec<{ due: number }>("SELECT MIN(due_at) AS due FROM timers").one().due,
    ]);
    expect(alarm).toBe(earliest);
    held.resolve("done");
    await quiesce();
  });

  it("after the alarm fires, and after an eviction, the alarm is set again for the earliest timer", async () => {
    useOneAgent("rearm");
    installFakes(() => "ok");
    const key = "agent:rearm:chat";
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => obj.ensureSession());
    await quiesce();
    const due = Date.now() + 3_600_000;
    const alarmOf = () => runInDurableObject(sessionStub(key), (_o, state) => state.storage.getAlarm());
    const armedFor = (t: number) =>
      runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
        obj.timers.set("pump", "queue", t);
        await obj.timers.arm();
      });
    await armedFor(due);
    expect(await alarmOf()).toBe(due);
    // The alarm fires (early: nothing is due) and is gone; the handler must set it again for the same time.
    expect(await runDurableObjectAlarm(sessionStub(key))).toBe(true);
    expect(await alarmOf()).toBe(due);
    // A new instance remembers nothing: it reads the alarm before deciding.
    await evict(sessionStub(key));
    await armedFor(due - 60_000);
    expect(await alarmOf()).toBe(due - 60_000);
    await evict(sessionStub(key));
    await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      obj.timers.clear("pump", "queue");
      await obj.timers.arm();
    });
    expect(await alarmOf()).toBe(null);
  });
});

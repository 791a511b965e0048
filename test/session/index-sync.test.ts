import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { RegistryObject } from "../../src/registry/registry-object";
import { useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, sendAndWait, sessionStub } from "../helpers/http";
import { list } from "../helpers/listing";

describe("registry sync (coalesced writes)", () => {
  it("a failed registry write is owed durably: the index timer row writes it later", async () => {
    const key = "agent:main:list-owed";
    await sendAndWait(key, "first");
    // The registry is down until we say otherwise (also for the alarm's retries meanwhile).
    const upsert = vi.spyOn(RegistryObject.prototype, "upsert").mockRejectedValue(new Error("registry unavailable"));
    const run = await sendAndWait(key, "second");
    expect(run.status).toBe("ok");
    expect(upsert).toHaveBeenCalled();
    const stale = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    const fresh = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(stale.updatedAt).toBeLessThan(fresh.updatedAt);
    const timers = await runInDurableObject(sessionStub(key), (_o, st) =>
      st.storage.sql.exec("SELECT kind FROM timers WHERE kind = 'index'").toArray(),
    );
    expect(timers).toHaveLength(1);
    upsert.mockRestore();
    await advance(key, 70_000);
    const row = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    expect(row.updatedAt).toBe(fresh.updatedAt);
    expect(row.totalTokens).toBe(fresh.totalTokens);
  });

  it("a busy session does not write its row per message, and its row is current once it goes idle", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:list-busy";
    const upserts = vi.spyOn(RegistryObject.prototype, "upsert");
    const posted = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call("POST", `/v1/sessions/${enc(key)}/messages`, { message: `b${i}` })),
    );
    expect(posted.every((r) => r.status === 202)).toBe(true);
    const ofKey = () => upserts.mock.calls.filter(([e]) => e.key === key).length;
    // 30 messages queued: the row was written at creation and at most once or twice more, not 30 times.
    expect(ofKey()).toBeLessThanOrEqual(3);
    for (let i = 0; i < 30; i++) {
      await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
      fake.pending()[0].reply("ok");
    }
    const last = posted[posted.length - 1].json.runId;
    await call("GET", `/v1/runs/${last}/wait?timeoutMs=10000`);
    // 30 runs ended; only the run that left the queue empty wrote through (plus the odd coalesced timer).
    expect(ofKey()).toBeLessThanOrEqual(8);
    const row = (await list({ limit: 200 }, key)).details.sessions.find((r: any) => r.key === key);
    expect(row).toMatchObject({ totalTokens: 210, model: "m1" });
  });
});

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { SessionObject } from "../../src/session/session-object";
import { FAKE_BASE_URL, useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";

async function post(key: string, message: string, extra: Record<string, unknown> = {}) {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message, ...extra });
  expect(r.status).toBe(202);
  expect(r.json).toMatchObject({ status: "accepted", runId: expect.any(String) });
  return r.json.runId as string;
}
const getRun = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json;
const wait = async (runId: string, ms = 10_000) => (await call("GET", `/v1/runs/${runId}/wait?timeoutMs=${ms}`)).json;
const texts = async (key: string) =>
  ((await call("GET", `/v1/sessions/${enc(key)}/history?limit=1000`)).json.messages as any[]).map(
    (m) => `${m.role}:${m.content?.[0]?.text ?? ""}`,
  );
const runRow = (key: string, runId: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    s.storage.sql
      .exec<{ status: string; attempts: number }>("SELECT status, attempts FROM runs WHERE id = ?", runId)
      .one(),
  );

describe("runs", () => {
  it("an inbound message creates the session, runs the echo model and records the transcript", async () => {
    const key = "agent:main:webchat:direct:alice";
    const run = await sendAndWait(key, "hello there", { channel: "webchat", to: "alice" });
    expect(run).toMatchObject({
      sessionKey: key,
      status: "ok",
      reply: "hello there",
      kind: "inbound",
      createdAt: expect.any(Number),
      startedAt: expect.any(Number),
      endedAt: expect.any(Number),
    });
    const hist = await call("GET", `/v1/sessions/${enc(key)}/history`);
    expect(hist.status).toBe(200);
    expect(hist.json.messages.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    expect(hist.json.messages[0]).toMatchObject({
      role: "user",
      content: [{ type: "text", text: "hello there" }],
      provenance: { kind: "external_user" },
      timestamp: expect.any(Number),
    });
    expect(hist.json.messages[1]).toMatchObject({
      role: "assistant",
      provider: "builtin",
      model: "echo",
      stopReason: "stop",
    });
    const row = await call("GET", `/v1/sessions/${enc(key)}`);
    expect(row.json).toMatchObject({
      key,
      kind: "other",
      channel: "webchat",
      lastChannel: "webchat",
      lastTo: "alice",
      model: "echo",
    });
  });

  it("an idempotencyKey returns the same run and records the message once", async () => {
    const key = "agent:main:runs-idem";
    const a = await post(key, "once", { idempotencyKey: "k-1" });
    const b = await post(key, "once", { idempotencyKey: "k-1" });
    expect(b).toBe(a);
    await wait(a);
    expect(await texts(key)).toEqual(["user:once", "assistant:once"]);
  });

  it("runs of one session execute one at a time, in FIFO order", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-fifo";
    const ids = [];
    for (let i = 1; i <= 4; i++) ids.push(await post(key, `m${i}`));
    for (let i = 1; i <= 4; i++) {
      await vi.waitFor(() => expect(fake.pending().length).toBe(1));
      const [inFlight] = fake.pending();
      expect(inFlight.lastUser).toBe(`m${i}`);
      expect((await getRun(ids[i - 1])).status).toBe("running");
      for (const later of ids.slice(i)) expect((await getRun(later)).status).toBe("queued");
      inFlight.reply(`r${i}`);
      expect(await wait(ids[i - 1])).toMatchObject({ status: "ok", reply: `r${i}` });
    }
    expect(fake.calls).toHaveLength(4);
    // The queued messages entered the transcript when their runs started: processing order.
    expect(await texts(key)).toEqual([
      "user:m1",
      "assistant:r1",
      "user:m2",
      "assistant:r2",
      "user:m3",
      "assistant:r3",
      "user:m4",
      "assistant:r4",
    ]);
  });

  it("runs of different sessions execute in parallel", async () => {
    const fake = useFakeProvider();
    const a = await post("agent:main:runs-par-a", "to a");
    const b = await post("agent:main:runs-par-b", "to b");
    const c = await post("agent:research:runs-par-c", "to c");
    // All three model calls are in flight at once.
    await vi.waitFor(() =>
      expect(
        fake
          .pending()
          .map((x) => x.lastUser)
          .sort(),
      ).toEqual(["to a", "to b", "to c"]),
    );
    for (const call of fake.pending().reverse()) call.reply(`re ${call.lastUser}`);
    expect((await wait(a)).reply).toBe("re to a");
    expect((await wait(b)).reply).toBe("re to b");
    expect((await wait(c)).reply).toBe("re to c");
  });

  it("a model failure ends the run with status error and the provider's message; the queue moves on", async () => {
    const fake = useFakeProvider({
      auto: (c) => (c.lastUser === "explode" ? c.fail(400, "bad request from fake") : c.reply(`ok ${c.lastUser}`)),
    });
    const key = "agent:main:runs-err";
    const bad = await post(key, "explode");
    const good = await post(key, "after");
    const r = await wait(bad);
    expect(r).toMatchObject({
      status: "error",
      error: expect.stringContaining("bad request from fake"),
      endedAt: expect.any(Number),
    });
    expect(r.reply).toBeUndefined();
    expect(await wait(good)).toMatchObject({ status: "ok", reply: "ok after" });
    const hist = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json.messages;
    expect(hist[1]).toMatchObject({
      role: "assistant",
      stopReason: "error",
      errorMessage: expect.stringContaining("bad request from fake"),
    });
    expect(fake.calls).toHaveLength(2);
  });

  it("an unusable model (e.g. a removed provider) ends the run with status error", async () => {
    const key = "agent:main:runs-badmodel";
    await sendAndWait(key, "first");
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.meta!.modelOverride = "gone/m1";
      obj.saveMeta();
    });
    const r = await sendAndWait(key, "second");
    expect(r).toMatchObject({
      status: "error",
      error: 'invalid model: gone/m1 (unknown provider "gone"; configure models.providers.gone)',
    });
  });

  it("a run past its deadline ends `timeout` (driven with advance), and the wait can be called again for the result", async () => {
    const fake = useFakeProvider({
      extraConfig: {
        agents: { defaults: { timeoutSeconds: 30 }, list: [{ id: "main", default: true, model: "fake/m1" }] },
      },
    });
    const key = "agent:main:runs-deadline";
    const id = await post(key, "slow");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    // A short wait returns the run as it is, not final: the client may call again.
    const early = await wait(id, 20);
    expect(early.status).toBe("running");
    const pendingWait = wait(id, 60_000);
    await advance(key, 31_000);
    const final = await pendingWait;
    expect(final).toMatchObject({ status: "timeout", error: "Run timed out after 30s" });
    // The model call was cancelled; a re-called wait (a reconnect) returns the same final result at once.
    await vi.waitFor(() => expect(fake.calls[0].aborted).toBe(true));
    expect(await wait(id)).toEqual(final);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.abortedLastRun).toBe(true);
    const hist = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json.messages;
    expect(hist.map((m: any) => m.stopReason ?? m.role)).toEqual(["user", "aborted"]);
  });

  it("a wait that times out returns the non-final run; calling wait again after completion returns the final result", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-rewait";
    const id = await post(key, "later");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect((await wait(id, 10)).status).toBe("running");
    fake.pending()[0].reply("done now");
    expect(await wait(id)).toMatchObject({ runId: id, sessionKey: key, status: "ok", reply: "done now" });
    expect(await wait(id, 0)).toMatchObject({ status: "ok", reply: "done now" });
  });

  it("abort ends a running run (waiters released, model call cancelled) and a queued run never starts", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-abort";
    const running = await post(key, "long");
    const queued = await post(key, "never");
    const third = await post(key, "third");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const waiting = wait(running, 60_000);
    const q = await call("POST", `/v1/runs/${queued}/abort`);
    expect(q.json).toMatchObject({ status: "aborted", error: "Run aborted" });
    const r = await call("POST", `/v1/runs/${running}/abort`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: "aborted", error: "Run aborted" });
    expect(await waiting).toMatchObject({ status: "aborted" });
    await vi.waitFor(() => expect(fake.calls[0].aborted).toBe(true));
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.pending()[0].lastUser).toBe("third");
    fake.pending()[0].reply("3");
    expect((await wait(third)).status).toBe("ok");
    // Aborting a final run changes nothing.
    expect((await call("POST", `/v1/runs/${third}/abort`)).json).toMatchObject({ status: "ok", reply: "3" });
    expect(fake.calls.map((c) => c.lastUser)).toEqual(["long", "third"]);
    expect((await texts(key)).filter((t) => t.startsWith("user:"))).toEqual(["user:long", "user:third"]);
  });

  it("contextTokens is the model's context window from models.providers.*.models[].contextWindow", async () => {
    useFakeProvider({
      auto: (c) => c.reply("counted", { prompt: 5, completion: 2 }),
      extraConfig: {
        models: {
          providers: { fake: { baseUrl: FAKE_BASE_URL, apiKey: "k", models: [{ id: "m1", contextWindow: 128_000 }] } },
        },
      },
    });
    const key = "agent:main:runs-context-window";
    await sendAndWait(key, "one");
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json).toMatchObject({
      model: "m1",
      inputTokens: 5,
      contextTokens: 128_000,
    });
  });

  it("usage (tokens) and the model are recorded on the run and the session", async () => {
    useFakeProvider({ auto: (c) => c.reply("counted", { prompt: 5, completion: 2 }) });
    const key = "agent:main:runs-usage";
    const r1 = await sendAndWait(key, "one");
    expect(r1).toMatchObject({ status: "ok", usage: { input: 5, output: 2, totalTokens: 7 }, model: "fake/m1" });
    await sendAndWait(key, "two");
    const row = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(row).toMatchObject({ model: "m1", totalTokens: 14, inputTokens: 10, outputTokens: 4, systemSent: true });
    // contextTokens is the model's context window, not the last input size: unset when config does not say.
    expect(row).not.toHaveProperty("contextTokens");
    // …and the listing shows it right after the wait returned (no stale coalesced row).
    const listed = await invoke("sessions_list", { limit: 200 }, { sessionKey: key });
    expect(listed.details.sessions.find((s: any) => s.key === key)).toMatchObject({ model: "m1", totalTokens: 14 });
    // The raw transcript keeps usage on the assistant message (sessions_history strips it).
    const lines = ((await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json as string)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[lines.length - 1].message).toMatchObject({
      role: "assistant",
      provider: "fake",
      model: "m1",
      usage: { input: 5, output: 2, totalTokens: 7 },
    });
  });
});

describe("restart safety (eviction mid-run)", () => {
  it("the lease timer re-queues a run whose executor was lost, once; a second loss ends it `lost`", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-evict";
    const id = await post(key, "fragile");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(await runRow(key, id)).toEqual({ status: "running", attempts: 1 });

    await crash(sessionStub(key));
    // Still "running" in storage: only the lease notices the executor is gone.
    expect(await runRow(key, id)).toEqual({ status: "running", attempts: 1 });
    await advance(key, 60_000);
    await vi.waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1].lastUser).toBe("fragile");
    expect(await runRow(key, id)).toEqual({ status: "running", attempts: 2 });

    await crash(sessionStub(key));
    await advance(key, 60_000);
    const r = await getRun(id);
    expect(r).toMatchObject({ status: "lost", error: "Run was interrupted by a restart and could not be resumed" });
    expect(fake.calls).toHaveLength(2);
    // The inbound message was recorded once despite two attempts.
    expect(await texts(key)).toEqual(["user:fragile", "assistant:"]);
  });

  it("queued runs survive an eviction and run, in order, after the retried run", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-evict-queue";
    const ids = [await post(key, "q1"), await post(key, "q2"), await post(key, "q3")];
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await crash(sessionStub(key));
    fake.abandonPending();
    await advance(key, 60_000);
    for (const [i, id] of ids.entries()) {
      await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
      expect(fake.pending()[0].lastUser).toBe(`q${i + 1}`);
      fake.pending()[0].reply(`a${i + 1}`);
      expect(await wait(id)).toMatchObject({ status: "ok", reply: `a${i + 1}` });
    }
    expect(await texts(key)).toEqual(["user:q1", "assistant:a1", "user:q2", "assistant:a2", "user:q3", "assistant:a3"]);
  });

  it("a wait whose object restarts mid-wait answers with the run as it is (not a 500); waiting again gets the result", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-evict-held";
    const id = await post(key, "held");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    // What a caller sees when the object is reset under a held wait: the RPC fails.
    const spy = vi
      .spyOn(SessionObject.prototype, "waitRun")
      .mockRejectedValueOnce(new Error("Durable Object reset because its code was updated."));
    const r = await call("GET", `/v1/runs/${id}/wait?timeoutMs=60000`);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ runId: id, status: "running" });
    fake.pending()[0].reply("after restart");
    expect(await wait(id)).toMatchObject({ status: "ok", reply: "after restart" });
  });

  it("a server-side wait is re-callable after an eviction and still gets the result", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-evict-wait";
    const id = await post(key, "survive");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await crash(sessionStub(key));
    fake.abandonPending();
    await advance(key, 60_000);
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const again = wait(id, 60_000);
    fake.pending()[0].reply("made it");
    expect(await again).toMatchObject({ status: "ok", reply: "made it" });
  });
});

describe("runners (src/session/extensions.ts produceReply)", () => {
  it("a run no runner claims ends error naming its kind and agent, and nothing answers it", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:runs-unclaimed";
    // A command run whose text is no /send command: the send-command runner declines it and the model
    // runner never takes commands, so no runner claims it.
    const run = await sessionStub(key).enqueue({ input: { kind: "command", message: "just text" } });
    expect(await wait(run.runId)).toMatchObject({
      status: "error",
      error: "No runner answers command runs of agent main",
    });
    expect(fake.calls).toHaveLength(0);
  });
});

import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, invoke, sendAndWait } from "../helpers/http";
import { openStream, type SseEvent } from "../helpers/sse";
import { installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

const MIN = 60_000;
const summary = (e: SseEvent) => `${e.event}:${JSON.parse(e.data).status ?? JSON.parse(e.data).role ?? ""}`;
const ECHOED = ["run:queued", "run:running", "message:user", "message:assistant", "run:ok"];

async function sessionIdOf(key: string): Promise<string> {
  return (await call("GET", `/v1/sessions/${enc(key)}/history?limit=1`)).json.sessionId;
}

describe("the end of a session's storage ends its streams (docs/events.md)", () => {
  it("deleting a session ends both its streams with `end` {reason: deleted}, and a resume id of the deleted session never skips events of the one created again", async () => {
    const key = "agent:main:events-deleted";
    await sendAndWait(key, "first life");
    const oldSessionId = await sessionIdOf(key);
    const session = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": "0" } });
    const seen = await session.sse.takeN(5);
    expect(seen.map((e) => e.id)).toEqual([1, 2, 3, 4, 5].map((n) => `${oldSessionId}:${n}`));
    // A run in flight (held by a fake model) with a watcher of its own.
    const fake = useFakeProvider();
    const held = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hold" });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const run = await openStream(`/v1/runs/${held.json.runId}/events`);
    expect((await session.sse.takeN(3)).map(summary)).toEqual(["run:queued", "run:running", "message:user"]);

    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(200);
    const end = { event: "end", data: JSON.stringify({ reason: "deleted" }) };
    expect(await session.sse.rest()).toEqual([end]);
    expect(await run.sse.rest()).toEqual([end]);
    // Gone, so a reconnect is a 404 …
    expect((await call("GET", `/v1/sessions/${enc(key)}/events`)).status).toBe(404);

    // … until the key's session is created again: a new sessionId, and seqs that start at 1 again.
    vi.restoreAllMocks();
    setConfigOverride(null);
    await sendAndWait(key, "second life");
    await sendAndWait(key, "more of it");
    const newSessionId = await sessionIdOf(key);
    expect(newSessionId).not.toBe(oldSessionId);
    const staleId = `${oldSessionId}:8`;
    const again = await openStream(`/v1/sessions/${enc(key)}/events`, { headers: { "Last-Event-ID": staleId } });
    const [reset, ...replayed] = await again.sse.takeN(11);
    expect(reset).toEqual({ event: "reset", data: JSON.stringify({ lastEventId: staleId }) });
    // Everything of the new session, though the stale id's 8 is a seq it has too.
    expect(replayed.map(summary)).toEqual([...ECHOED, ...ECHOED]);
    expect(replayed.map((e) => e.id)).toEqual(Array.from({ length: 10 }, (_, i) => `${newSessionId}:${i + 1}`));
    await again.sse.cancel();
  });

  it("a resume id past the newest event, or a bare number from before ids named the session, starts over with `reset`", async () => {
    const key = "agent:main:events-reset";
    await sendAndWait(key, "one");
    const sessionId = await sessionIdOf(key);
    for (const stale of [`${sessionId}:99`, "3"]) {
      const { sse } = await openStream(`/v1/sessions/${enc(key)}/events?lastEventId=${enc(stale)}`);
      const [reset, ...replayed] = await sse.takeN(6);
      expect(reset).toEqual({ event: "reset", data: JSON.stringify({ lastEventId: stale }) });
      expect(replayed.map((e) => e.id)).toEqual([1, 2, 3, 4, 5].map((n) => `${sessionId}:${n}`));
      await sse.cancel();
    }
    // An id of this session continues after it, with no reset.
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events?lastEventId=${enc(`${sessionId}:3`)}`);
    expect((await sse.takeN(2)).map((e) => e.id)).toEqual([`${sessionId}:4`, `${sessionId}:5`]);
    await sse.cancel();
    const bad = await call("GET", `/v1/sessions/${enc(key)}/events?lastEventId=${enc("x y:1")}`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("lastEventId");
  });

  it("archiving a sub-agent session (its archival timer) ends its stream with `end` {reason: archived}", async () => {
    setConfigOverride(subagentConfig({}));
    installFakes((c) => (c.step === "task" ? "result" : c.step === "announce" ? "notes" : "hi"));
    const r = await invoke("sessions_spawn", { task: "archive me" }, { sessionKey: requesterKey("events-archive") });
    const child: string = r.details.childSessionKey;
    await settle(child);
    const { sse } = await openStream(`/v1/sessions/${enc(child)}/events`);
    await advance(child, 60 * MIN);
    expect(await sse.rest()).toEqual([{ event: "end", data: JSON.stringify({ reason: "archived" }) }]);
  });
});

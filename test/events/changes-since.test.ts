import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { writeCompaction } from "../../src/compaction/store";
import { setConfigOverride } from "../../src/config/load";
import { EVENT_LIMITS } from "../../src/events/limits";
import type { StateChange } from "../../src/events/state-kinds";
import { stateSince } from "../../src/events/state-log";
import type { SessionObject } from "../../src/session/session-object";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { evict } from "../helpers/restart";
import { installFakes, releaseAndSettleChildren, settle, subagentConfig } from "../helpers/subagents";

const DEFAULTS = { ...EVENT_LIMITS };
afterEach(async () => {
  Object.assign(EVENT_LIMITS, DEFAULTS);
  await releaseAndSettleChildren();
});

const changes = async (key: string, changesSince: number) => {
  const r = await invoke("session_status", { changesSince }, { sessionKey: key });
  expect(r.status).toBe(200);
  return r.details as { stateVersion: number; sessionId: string; stateChanges: any };
};

/** Append events straight to the session's log, as the live stream's writers do (inside a transaction). */
async function appendEvents(key: string, specs: Array<"state" | "other">): Promise<number[]> {
  const stub: DurableObjectStub = sessionStub(key);
  const seqs: number[] = [];
  await runInDurableObject(stub, (obj: SessionObject, state) =>
    state.storage.transactionSync(() => {
      specs.forEach((s, i) => {
        const seq = obj.events.log.append(
          "run",
          JSON.stringify({ n: i }),
          s === "state"
            ? ({ kind: "run_completed", actorType: "system", occurredAt: 1, summary: "run completed" } as StateChange)
            : null,
        );
        seqs.push(seq);
      });
    }),
  );
  return seqs;
}

describe("session_status changesSince (the state log)", () => {
  it("maps the session's events to typed state changes, ascending, with the run ids; stateVersion is the head", async () => {
    let fail = false;
    useFakeProvider({ auto: (c) => (fail ? c.fail(500, "boom") : c.reply("ok")) });
    const key = "agent:main:changes-kinds";
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hi", channel: "telegram", to: "42" });
    await call("GET", `/v1/runs/${r.json.runId}/wait?timeoutMs=10000`);
    fail = true;
    const failed = await sendAndWait(key, "again");
    expect(failed.status).toBe("error");
    const d = await changes(key, 0);
    const events = d.stateChanges.events;
    expect(events.map((e: any) => [e.kind, e.actorType, e.summary])).toEqual([
      ["human_direct_message", "human", "human message via telegram"],
      ["run_completed", "system", "run completed"],
      ["human_direct_message", "human", "human message via unknown"],
      ["run_failed", "system", "run failed"],
    ]);
    expect(events[0]).toMatchObject({ runId: r.json.runId, payload: { channel: "telegram" } });
    expect(events[3]).toMatchObject({ runId: failed.runId, payload: { outcome: "error" } });
    for (const e of events) expect(typeof e.occurredAt).toBe("number");
    const seqs = events.map((e: any) => e.sequence);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(d.stateVersion).toBe(seqs.at(-1));
    expect(d.stateChanges).toMatchObject({ truncated: false, historyGap: false, earliestAvailableSequence: seqs[0] });
    // From the head: nothing new. From the middle: the rest.
    expect((await changes(key, d.stateVersion)).stateChanges.events).toEqual([]);
    expect((await changes(key, seqs[1])).stateChanges.events.map((e: any) => e.sequence)).toEqual(seqs.slice(2));
    // A compaction is a state change too, written with its marker (src/compaction/store.ts).
    const stub: DurableObjectStub = sessionStub(key);
    await runInDurableObject(stub, (obj: SessionObject) => {
      writeCompaction(obj, { runId: "r", firstKeptSeq: 2, summary: "s", tokensBefore: 9, tokensAfter: 3 });
    });
    const after = (await changes(key, d.stateVersion)).stateChanges.events;
    expect(after).toMatchObject([{ kind: "compacted", actorType: "system", summary: "session compacted", runId: "r" }]);
  });

  it("an aborted run is run_failed with outcome cancelled, a timed-out one outcome timeout", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:changes-abort";
    const sent = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hold" });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1), { timeout: 10_000, interval: 5 });
    expect((await call("POST", `/v1/runs/${sent.json.runId}/abort`)).json.status).toBe("aborted");
    const timed = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "slow" });
    await vi.waitFor(() => expect(fake.calls.filter((c) => c.lastUser === "slow" && !c.settled)).toHaveLength(1), {
      timeout: 10_000,
      interval: 5,
    });
    // The run's deadline comes due now (docs/timers.md): its timer row is moved, the alarm runs it.
    await runInDurableObject(sessionStub(key) as DurableObjectStub, (_o: SessionObject, state) => {
      state.storage.sql.exec("UPDATE timers SET due_at = 0 WHERE kind = 'deadline'");
    });
    await runDurableObjectAlarm(sessionStub(key));
    await call("GET", `/v1/runs/${timed.json.runId}/wait?timeoutMs=10000`);
    const ended = (await changes(key, 0)).stateChanges.events.filter((e: any) => e.kind === "run_failed");
    expect(ended.map((e: any) => [e.runId, e.summary, e.payload])).toEqual([
      [sent.json.runId, "run cancelled", { outcome: "cancelled" }],
      [timed.json.runId, "run timed out", { outcome: "timeout" }],
    ]);
  });

  it("a spawned child's log: child_spawned by its requester, then child run completed; sessions_send is agent_message", async () => {
    setConfigOverride(subagentConfig({ tools: { sessions: { visibility: "all" } } }));
    installFakes(() => "done");
    const child = (await invoke("sessions_spawn", { task: "t" })).details.childSessionKey;
    await settle(child);
    const childEvents = (
      await invoke("session_status", { sessionKey: child, changesSince: 0 }, { sessionKey: "agent:main:main" })
    ).details.stateChanges.events;
    expect(childEvents.slice(0, 2).map((e: any) => [e.kind, e.actorType, e.summary, e.actorId])).toEqual([
      ["child_spawned", "agent", "child session spawned", "agent:main:main"],
      ["run_completed", "system", "child run completed", undefined],
    ]);
    // The child's own later turns (its announce step) are runs of the child, not its task.
    for (const e of childEvents.slice(2)) expect([e.kind, e.summary]).toEqual(["run_completed", "run completed"]);
    const target = "agent:main:changes-send-target";
    await sendAndWait(target, "seed");
    const head = (await changes(target, 0)).stateVersion;
    await invoke("sessions_send", { sessionKey: target, message: "ping", timeoutSeconds: 0 });
    const sent = (await changes(target, head)).stateChanges.events;
    expect(sent[0]).toMatchObject({
      kind: "agent_message",
      actorType: "agent",
      actorId: "agent:main:main",
      summary: "message from session agent:main:main",
    });
  });

  it("works across an eviction: the same events, the same head, and new ones after it", async () => {
    useFakeProvider({ auto: (c) => c.reply("ok") });
    const key = "agent:main:changes-evict";
    await sendAndWait(key, "one");
    const before = await changes(key, 0);
    await evict(sessionStub(key));
    const again = await changes(key, 0);
    expect(again.stateVersion).toBe(before.stateVersion);
    expect(again.stateChanges).toEqual(before.stateChanges);
    await sendAndWait(key, "two");
    await evict(sessionStub(key));
    const next = (await changes(key, before.stateVersion)).stateChanges.events;
    expect(next.map((e: any) => e.kind)).toEqual(["human_direct_message", "run_completed"]);
    expect(next[0].sequence).toBeGreaterThan(before.stateVersion);
  });

  it("at most 200 events, truncated, and the next call from the last one returns the rest", async () => {
    useFakeProvider({ auto: (c) => c.reply("ok") });
    const key = "agent:main:changes-truncated";
    await sendAndWait(key, "seed");
    const base = (await changes(key, 0)).stateVersion;
    // 250 state changes among 250 other events: the page skips the others without counting them.
    await appendEvents(
      key,
      Array.from({ length: 500 }, (_, i) => (i % 2 ? "state" : "other")),
    );
    const first = await changes(key, base);
    expect(first.stateChanges.events).toHaveLength(200);
    expect(first.stateChanges.truncated).toBe(true);
    const lastSeen = first.stateChanges.events.at(-1).sequence;
    const rest = await changes(key, lastSeen);
    expect(rest.stateChanges.events).toHaveLength(50);
    expect(rest.stateChanges.truncated).toBe(false);
    expect(rest.stateChanges.events.at(-1).sequence).toBe(rest.stateVersion);
  });

  it("a read costs its page, not the log: SQLite rows read stay the same with 6,000 other events in the log", async () => {
    useFakeProvider({ auto: (c) => c.reply("ok") });
    const key = "agent:main:changes-cost";
    await sendAndWait(key, "seed");
    const rowsRead = async (since: number) => {
      const stub: DurableObjectStub = sessionStub(key);
      return runInDurableObject(stub, (_obj: SessionObject, state) => {
        const cursors: { rowsRead: number }[] = [];
        let marksReads = 0;
        const sql = state.storage.sql;
        const counting = {
          exec: (query: string, ...bindings: unknown[]) => {
            if (query.includes("FROM event_marks")) marksReads++;
            const c = sql.exec(query, ...bindings);
            cursors.push(c);
            return c;
          },
        } as unknown as SqlStorage;
        // As session_status reads it (src/session/status-rpc.ts): the head and the changes.
        const out = stateSince(counting, since);
        // The head and the pruned watermark come from one read of event_marks, shared by both.
        expect(marksReads).toBe(1);
        expect(out.stateChanges!.events.at(-1)!.sequence).toBe(out.stateVersion);
        return { read: cursors.reduce((n, c) => n + c.rowsRead, 0), events: out.stateChanges!.events.length };
      });
    };
    const small = await rowsRead(0);
    await appendEvents(
      key,
      Array.from({ length: 6000 }, () => "other"),
    );
    await appendEvents(key, ["state", "state"]);
    const large = await rowsRead(0);
    expect(large.events).toBe(small.events + 2);
    // The two more events are read, nothing of the 6,000 others.
    expect(large.read).toBeLessThanOrEqual(small.read + 2);
  });

  it("historyGap is exact: true only when a state change after the version was pruned, also after an eviction", async () => {
    useFakeProvider({ auto: (c) => c.reply("ok") });
    const key = "agent:main:changes-gap";
    await sendAndWait(key, "seed");
    // A fresh log tail: [A] other other [B] other …, then retention prunes from the front.
    const start = (await changes(key, 0)).stateVersion;
    const [a, , , b] = await appendEvents(key, ["state", "other", "other", "state", "other"]);
    EVENT_LIMITS.retainedEvents = 5;
    // Each append deletes what falls past the newest 5: here through b - 1 (A and the two others after it).
    const more = await appendEvents(key, ["other", "other", "other"]);
    expect(more.at(-1)! - 5).toBe(b - 1);
    const gapAt = async (v: number) => (await changes(key, v)).stateChanges;
    expect((await gapAt(start)).historyGap).toBe(true); // A (after `start`) was pruned
    expect((await gapAt(a - 1)).historyGap).toBe(true);
    // Events a+1 … b-1 were pruned too, but none was a state change: no gap, B is there.
    const fromA = await gapAt(a);
    expect(fromA.historyGap).toBe(false);
    expect(fromA.events.map((e: any) => e.sequence)).toEqual([b]);
    expect(fromA.earliestAvailableSequence).toBe(b);
    // Prune B too: the head survives it; nothing is retained, so the earliest available is head + 1.
    await appendEvents(key, ["other", "other", "other", "other"]);
    await evict(sessionStub(key));
    const gone = await changes(key, a);
    expect(gone.stateVersion).toBe(b);
    expect(gone.stateChanges).toEqual({
      events: [],
      truncated: false,
      earliestAvailableSequence: b + 1,
      historyGap: true,
    });
    expect((await gapAt(b)).historyGap).toBe(false);
  });

  it("a version from an earlier incarnation past this one's seqs is a gap; sessionId tells incarnations apart", async () => {
    useFakeProvider({ auto: (c) => c.reply("ok") });
    const key = "agent:main:changes-incarnation";
    await sendAndWait(key, "one");
    await appendEvents(
      key,
      Array.from({ length: 20 }, () => "other"),
    );
    await sendAndWait(key, "two");
    const old = await changes(key, 0);
    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(200);
    await sendAndWait(key, "again");
    const fresh = await changes(key, old.stateVersion);
    expect(fresh.sessionId).not.toBe(old.sessionId);
    expect(fresh.stateVersion).toBeLessThan(old.stateVersion);
    expect(fresh.stateChanges).toMatchObject({ events: [], historyGap: true });
    // A session without any state change: version 0, nothing to list, no gap.
    const blank = "agent:main:changes-blank";
    await sessionStub(blank).ensureSession();
    const none = await changes(blank, 0);
    expect(none.stateVersion).toBe(0);
    expect(none.stateChanges).toEqual({
      events: [],
      truncated: false,
      earliestAvailableSequence: 0,
      historyGap: false,
    });
  });
});

import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { EVENT_LIMITS, NEXT } from "../../src/events/limits";
import type { SessionObject } from "../../src/session/session-object";
import { enc, sendAndWait, sessionStub } from "../helpers/http";
import { openStream, type SseEvent } from "../helpers/sse";

const DEFAULTS = { ...EVENT_LIMITS };
afterEach(() => Object.assign(EVENT_LIMITS, DEFAULTS));

const seqOf = (e: SseEvent) => Number(e.id?.split(":").at(-1));
const deliveryIdOf = (e: SseEvent) => JSON.parse(e.data).deliveryId;

/** A delivery event as the outbox records it (src/channels/outbox-rows.ts), with a recognisable id. */
function recordDelivery(obj: SessionObject, id: string): void {
  obj.events.delivery({ id, status: "pending", kind: "reply", channel: "x", attempts: 0, error: null });
}

describe("session events are published when their transaction commits (src/events/commit-gate.ts)", () => {
  it("watching costs the object no storage read per event: 150 events reach a watcher and not one SELECT runs", async () => {
    const key = "agent:main:events-no-reads";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    const selects = await runInDurableObject(sessionStub(key), async (obj: SessionObject, state) => {
      const sql = obj.sql;
      const exec = sql.exec;
      let count = 0;
      // Every SQL statement of the object goes through this one SqlStorage (state.storage.sql).
      sql.exec = ((query: string, ...bindings: unknown[]) => {
        if (/^\s*select\b/i.test(query)) count++;
        return exec.call(sql, query, ...bindings);
      }) as typeof sql.exec;
      try {
        for (let i = 0; i < 150; i++) {
          state.storage.transactionSync(() => recordDelivery(obj, `d${i}`));
          // Each commit is published on its own (no batching across transactions hides a per-batch read).
          await Promise.resolve();
        }
      } finally {
        sql.exec = exec;
      }
      return count;
    });
    const events = await sse.takeN(150);
    expect(events.map(deliveryIdOf)).toEqual(Array.from({ length: 150 }, (_, i) => `d${i}`));
    expect(events.map(seqOf)).toEqual(Array.from({ length: 150 }, (_, i) => i + 6));
    expect(selects).toBe(0);
    await sse.cancel();
  });

  it("a nested transaction that throws drops its events; one that returns joins its parent; a parent that throws drops both", async () => {
    const key = "agent:main:events-savepoints";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    await runInDurableObject(sessionStub(key), (obj: SessionObject, state) => {
      const tx = <T>(body: () => T) => state.storage.transactionSync(body);
      tx(() => {
        recordDelivery(obj, "outer-1");
        expect(() =>
          tx(() => {
            recordDelivery(obj, "inner-rolled-back");
            throw new Error("savepoint rolled back");
          }),
        ).toThrow("savepoint rolled back");
        tx(() => recordDelivery(obj, "inner-kept"));
        recordDelivery(obj, "outer-2");
      });
      expect(() =>
        tx(() => {
          recordDelivery(obj, "parent-rolled-back");
          tx(() => recordDelivery(obj, "child-of-rolled-back"));
          throw new Error("all rolled back");
        }),
      ).toThrow("all rolled back");
      // Outside any transaction an event is its own transaction.
      recordDelivery(obj, "alone");
    });
    const events = await sse.takeN(4);
    expect(events.map(deliveryIdOf)).toEqual(["outer-1", "inner-kept", "outer-2", "alone"]);
    // Rolled-back seqs are handed out again; the watcher sees each seq once, in order.
    expect(events.map(seqOf)).toEqual([6, 7, 8, 9]);
    await sendAndWait(key, "y");
    expect((await sse.takeN(5)).map(seqOf)).toEqual([10, 11, 12, 13, 14]);
    await sse.cancel();
  });

  it("the replay guard: an event a replay page already carried (read inside its transaction) is not sent again on commit", async () => {
    EVENT_LIMITS.replayPageEvents = 3;
    const key = "agent:main:events-replay-guard";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events?lastEventId=0`);
    expect((await sse.takeN(5)).map(seqOf)).toEqual([1, 2, 3, 4, 5]);
    await runInDurableObject(sessionStub(key), async (obj: SessionObject, state) => {
      const [ws] = state.getWebSockets("session");
      // The watcher is still replaying (it has read up to 4 and not asked for its next page yet) when a transaction
      // writes event 6 and, before it commits, the watcher's next page is read: that page carries 5 and 6
      // and ends the replay; the commit then publishes 6 to live watchers.
      ws.serializeAttachment({ kind: "session", cursor: 4, live: false });
      state.storage.transactionSync(() => {
        recordDelivery(obj, "during-replay");
        obj.webSocketMessage(ws, NEXT);
      });
    });
    const events = await sse.takeN(2);
    expect(events.map((e) => [seqOf(e), e.event])).toEqual([
      [5, "run"],
      [6, "delivery"],
    ]);
    // The next event follows directly: 6 was not sent a second time.
    await sendAndWait(key, "y");
    expect((await sse.takeN(5)).map(seqOf)).toEqual([7, 8, 9, 10, 11]);
    await sse.cancel();
  });

  it("a transaction whose events cannot be published still returns normally: it has committed", async () => {
    const key = "agent:main:events-publish-fails";
    await sendAndWait(key, "x");
    const { sse } = await openStream(`/v1/sessions/${enc(key)}/events`);
    const returned = await runInDurableObject(sessionStub(key), (obj: SessionObject, state) => {
      const [ws] = state.getWebSockets("session");
      const read = ws.deserializeAttachment;
      ws.deserializeAttachment = () => {
        throw new Error("broken socket");
      };
      try {
        return state.storage.transactionSync(() => {
          recordDelivery(obj, "committed-anyway");
          return "returned";
        });
      } finally {
        ws.deserializeAttachment = read;
      }
    });
    expect(returned).toBe("returned");
    // The event is stored: a replay carries it.
    const replay = await openStream(`/v1/sessions/${enc(key)}/events?lastEventId=0`);
    expect((await replay.sse.takeN(6)).map(deliveryIdOf).at(-1)).toBe("committed-anyway");
    await replay.sse.cancel();
    await sse.cancel();
  });
});

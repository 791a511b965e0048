import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { PRUNE_TIMER, RETENTION_MS } from "../../src/session/retention";
import type { SessionObject } from "../../src/session/session-object";
import { advance, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { installFakes, outboxOf, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/**
 * Finished flow rows and delivered outbox rows are pruned a week after they finished (src/session/retention.ts:
 * a long-lived session's storage must not grow with its history of finished work). Live rows stay.
 */

const MIN = 60_000;

/** Move a session's clock forward: its rows' timestamps and its timers age by `ms`, then its alarm runs. */
async function age(key: string, ms: number): Promise<void> {
  await runInDurableObject(sessionStub(key), async (_o: SessionObject, state) => {
    const sql = state.storage.sql;
    sql.exec("UPDATE flows SET created_at = created_at - ?, updated_at = updated_at - ?", ms, ms);
    sql.exec(
      "UPDATE outbox SET created_at = created_at - ?, updated_at = updated_at - ?, delivered_at = delivered_at - ?",
      ms,
      ms,
      ms,
    );
  });
  await advance(key, ms);
}

async function rows(key: string) {
  return runInDurableObject(sessionStub(key), async (_o: SessionObject, state) => ({
    flows: state.storage.sql
      .exec<{ kind: string; state: string }>("SELECT kind, state FROM flows ORDER BY kind, state")
      .toArray()
      .map((r) => `${r.kind}:${r.state}`),
    timers: state.storage.sql.exec<{ kind: string; due_at: number }>("SELECT kind, due_at FROM timers").toArray(),
  }));
}

describe("retention of finished work", () => {
  it("a week after they finished, a requester's child slots, announce dedupe keys and delivered announces are pruned; live ones stay", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) =>
      c.step === "task" ? (c.lastUser.includes("slow") ? "hang" : "done") : c.step === "announce" ? "" : "hi",
    );
    const req = requesterKey("retention");
    await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
    const quick = (await invoke("sessions_spawn", { task: "quick" }, { sessionKey: req })).details
      .childSessionKey as string;
    await invoke("sessions_spawn", { task: "slow" }, { sessionKey: req });
    await settle(quick);
    await runDurableObjectAlarm(sessionStub(req));

    const before = await rows(req);
    expect(before.flows).toEqual(["subagent_announce_in:recorded", "subagent_child:ended", "subagent_child:running"]);
    expect((await outboxOf(req)).map((o) => `${o.kind}:${o.status}`)).toEqual(["subagent_announce:delivered"]);
    const prune = before.timers.find((t) => t.kind === PRUNE_TIMER)!;
    expect(prune.due_at - Date.now()).toBeGreaterThan(RETENTION_MS - MIN);

    await age(req, RETENTION_MS - 10 * MIN);
    expect((await rows(req)).flows).toHaveLength(3);
    await age(req, 11 * MIN);
    // Only the live slot of the child that still runs is left; nothing finished remains, so no prune timer either.
    const after = await rows(req);
    expect(after.flows).toEqual(["subagent_child:running"]);
    expect(after.timers.map((t) => t.kind)).not.toContain(PRUNE_TIMER);
    expect(await outboxOf(req)).toEqual([]);
  });

  it("a session with nothing finished gets no prune alarm", async () => {
    const key = `agent:main:webchat:direct:plain-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(key, "hello");
    await runInDurableObject(sessionStub(key), (_o: SessionObject, state) => state.storage.setAlarm(Date.now() + MIN));
    expect(await runDurableObjectAlarm(sessionStub(key))).toBe(true);
    expect((await rows(key)).timers.map((t) => t.kind)).not.toContain(PRUNE_TIMER);
  });

  it("a large backlog is pruned in bounded batches, each in its own alarm", async () => {
    const key = `agent:main:webchat:direct:backlog-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(key, "hello");
    // Rows that expire in 5 minutes, so no batch can run before the test moves the clock.
    const old = Date.now() - RETENTION_MS + 5 * MIN;
    await runInDurableObject(sessionStub(key), async (_o: SessionObject, state) => {
      for (let i = 0; i < 1_200; i++) {
        state.storage.sql.exec(
          "INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, 'a2a', 'done', '{}', ?, ?)",
          `f${i}`,
          old,
          old,
        );
      }
      state.storage.sql.exec(
        "INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES ('live', 'a2a', 'turn', '{}', ?, ?)",
        old,
        old,
      );
      // Any alarm of the session arms the prune timer; make sure one is scheduled.
      await state.storage.setAlarm(Date.now() + MIN);
    });
    await runDurableObjectAlarm(sessionStub(key));
    const armed = (await rows(key)).timers.find((t) => t.kind === PRUNE_TIMER)!;
    expect(Math.abs(armed.due_at - (old + RETENTION_MS))).toBeLessThan(1_000);
    const counts: number[] = [];
    await age(key, 6 * MIN);
    counts.push((await rows(key)).flows.length);
    for (let i = 0; i < 3; i++) {
      await age(key, 2_000);
      counts.push((await rows(key)).flows.length);
    }
    expect(counts).toEqual([701, 201, 1, 1]);
    expect((await rows(key)).flows).toEqual(["a2a:turn"]);
  });
});

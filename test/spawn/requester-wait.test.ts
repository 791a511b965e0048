import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { REQUESTER_IDLE_WAIT_MS } from "../../src/spawn/requester-turn";
import { call, enc, sessionStub } from "../helpers/http";
import { answers, delivered, isTurn, REQUESTER_MODE, setup, spawnChildren, stepsOf } from "../helpers/requester-turns";
import { announcesIn, releaseAndQuiesce, settle } from "../helpers/subagents";

/**
 * "requester" announce delivery with a requester that is never idle (docs/subagents.md): its completion turn
 * cannot start, so a completion waits at most REQUESTER_IDLE_WAIT_MS, then its direct announce is delivered
 * and the child's slot is freed — never held for as long as the requester stays busy.
 */

afterEach(releaseAndQuiesce);

/** Age the requester's waiting completions by `ms` (their wait is counted from when they arrived) and run its turn timer. */
async function waitLonger(req: string, ms: number): Promise<void> {
  await runInDurableObject(sessionStub(req), async (_obj, state) => {
    state.storage.sql.exec(
      "UPDATE flows SET created_at = created_at - ? WHERE kind = 'subagent_announce_in' AND state = 'turn_pending'",
      ms,
    );
    state.storage.sql.exec("UPDATE timers SET due_at = 0 WHERE kind = 'subagent-turn'");
  });
  await runDurableObjectAlarm(sessionStub(req));
}

describe("a requester that is never idle", () => {
  it("gets its completion's direct announce after the bounded wait, and the child's slot back", async () => {
    const busyAnswer = answers();
    const { req, fakes } = await setup({ ...REQUESTER_MODE, defaults: { timeoutSeconds: 24 * 3600 } }, (c) =>
      c.lastUser === "stay busy" ? "hang" : busyAnswer(c),
    );
    await call("POST", `/v1/sessions/${enc(req)}/messages`, { message: "stay busy" });
    await vi.waitFor(() => expect(fakes.model.some((c) => c.lastUser === "stay busy")).toBe(true), {
      timeout: 10_000,
      interval: 10,
    });
    const [kid] = await spawnChildren(req, 1);
    await settle(kid);
    await runDurableObjectAlarm(sessionStub(req));
    expect((await stepsOf(req)).events.map((e) => e.state)).toEqual(["turn_pending"]);
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(1);

    // Still within the bound: it keeps waiting for its turn.
    await waitLonger(req, REQUESTER_IDLE_WAIT_MS - 60_000);
    expect((await stepsOf(req)).events.map((e) => e.state)).toEqual(["turn_pending"]);
    // Past it: the direct announce instead of a turn, and the slot is free.
    await waitLonger(req, 61_000);
    expect((await stepsOf(req)).events.map((e) => e.state)).toEqual(["fallback"]);
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
    expect(await announcesIn(req, kid)).toHaveLength(1);
    await vi.waitFor(() => expect(delivered(fakes, req).map((b) => b.kind)).toContain("subagent_announce"), {
      timeout: 10_000,
      interval: 10,
    });
    expect(fakes.model.filter(isTurn)).toEqual([]);
  });
});

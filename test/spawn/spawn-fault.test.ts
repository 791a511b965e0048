import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { advance, invoke, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import { until } from "../helpers/scripted";
import { announcesIn, childState, installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/** Until the child's announce is handed off: expire leases (lost executors) and retry timers by moving time, wait runs server-side. */
async function driveToAnnounce(child: string): Promise<void> {
  const stub = sessionStub(child);
  for (let i = 0; i < 15; i++) {
    await advance(child, 60_000);
    const s = await childState(child);
    const handedOff = s.flows.some((f) => f.id.startsWith("announce:") && f.state === "done");
    if (handedOff && !s.timers.some((t) => t.kind === "subagent-handoff")) return;
    for (const id of s.pendingRuns) await stub.waitRun(id, 5_000);
  }
  throw new Error(`child ${child} never announced: ${JSON.stringify(await childState(child))}`);
}

describe("sessions_spawn under faults", () => {
  it("20 children, every object evicted while they run: each child still ends with exactly one announce", async () => {
    // All 20 run at once (maxConcurrent 20; the default 8 would queue 12 of them: test/lane/subagent-lane.test.ts).
    setConfigOverride(subagentConfig({ subagents: { maxChildrenPerAgent: 20, maxConcurrent: 20 } }));
    let hang = true;
    const fakes = installFakes((c) =>
      c.step === "task"
        ? hang
          ? "hang"
          : `result for ${/\[Subagent Task\]: (.*)$/.exec(c.lastUser)?.[1]}`
        : c.step === "announce"
          ? ""
          : "hi",
    );
    const req = requesterKey("fault");

    const spawned = await Promise.all(
      Array.from({ length: 20 }, (_, i) => invoke("sessions_spawn", { task: `job ${i}` }, { sessionKey: req })),
    );
    const children = spawned.map((r) => {
      expect(r.details.status).toBe("accepted");
      return r.details.childSessionKey as string;
    });
    expect(new Set(children).size).toBe(20);
    // Each task starts once the sub-agent lane grants its slot (on the child's alarm, right after the spawn).
    for (const child of children)
      await until(async () => expect((await childState(child)).runs.map((r) => r.status)).toEqual(["running"]));
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(20);

    // Every executor is lost: nothing of the in-flight work survives in memory.
    await crash(sessionStub(req), ...children.map(sessionStub));
    hang = false;

    for (const child of children) await driveToAnnounce(child);
    await runDurableObjectAlarm(sessionStub(req));

    const all = await announcesIn(req);
    expect(all).toHaveLength(20);
    for (const [i, child] of children.entries()) {
      const mine = await announcesIn(req, child);
      expect(mine).toHaveLength(1);
      // The lost run was noticed by its lease timer and retried once: it completed.
      expect(mine[0].text.startsWith(`Status: completed successfully\nResult: result for job ${i}\n`)).toBe(true);
    }
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
    expect(fakes.model.filter((c) => c.step === "task").length).toBeGreaterThanOrEqual(20);
  });

  it("a hand-off whose acknowledgement was lost is re-sent after an eviction and de-duplicated by the requester", async () => {
    // No archive timer, so the only due timer below is the re-armed hand-off.
    setConfigOverride(subagentConfig({ subagents: { archiveAfterMinutes: 0 } }));
    installFakes((c) => (c.step === "task" ? "r" : c.step === "announce" ? "n" : "hi"));
    const req = requesterKey("lost-ack");
    const child = (await invoke("sessions_spawn", { task: "t" }, { sessionKey: req })).details
      .childSessionKey as string;
    await settle(child);
    expect(await announcesIn(req, child)).toHaveLength(1);
    await evict(sessionStub(req), sessionStub(child));
    // Put the child back to "hand-off pending", as if it had crashed after the RPC but before recording the ack.
    await runInDurableObject(sessionStub(child), async (_obj, state) => {
      const flow = state.storage.sql.exec<{ id: string }>("SELECT id FROM flows WHERE id LIKE 'announce:%'").one();
      state.storage.sql.exec("UPDATE flows SET state = 'handoff' WHERE id = ?", flow.id);
      state.storage.sql.exec(
        "INSERT INTO timers (kind, ref, due_at) VALUES ('subagent-handoff', ?, ?)",
        flow.id.slice("announce:".length),
        Date.now() + 3_600_000,
      );
      await state.storage.setAlarm(Date.now() + 3_600_000);
    });
    await advance(child, 2 * 3_600_000);
    const s = await childState(child);
    expect(s.flows.find((f) => f.id.startsWith("announce:"))!.state).toBe("done");
    expect(s.timers.filter((t) => t.kind === "subagent-handoff")).toEqual([]);
    expect(await announcesIn(req, child)).toHaveLength(1);
  });
});

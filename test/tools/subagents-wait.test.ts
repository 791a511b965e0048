import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import { newTaskId } from "../../src/tasks/task-id";
import { advance, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import {
  installFakes,
  type ModelCall,
  releaseAndSettleChildren,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";
import { ledgerOf, spawn } from "../helpers/tasks";

/**
 * `subagents` action `wait` (src/tools/subagents-wait.ts): OpenClaw's parameters, limits, reasons and their
 * precedence; a wait held in the owner's object and woken by the task's end, re-attached when that object
 * restarts mid-wait.
 */

afterEach(releaseAndSettleChildren);

function fakes() {
  setConfigOverride(subagentConfig());
  installFakes((c: ModelCall) =>
    c.step === "task" ? (c.lastUser.includes("slow") ? "hang" : "done: 42") : c.step === "announce" ? "" : "ok",
  );
}

const wait = (req: string, args: Record<string, unknown>) =>
  invoke("subagents", { action: "wait", ...args }, { sessionKey: req });

/** Resolves once `n` waits are held in the owner's object. */
async function attached(owner: string, n = 1): Promise<void> {
  await vi.waitFor(
    async () => {
      const held = await callExtension(sessionStub(owner), "task-ledger", "waiting");
      if (held < n) throw new Error(`${held} waits held`);
    },
    { timeout: 10_000, interval: 10 },
  );
}

describe("subagents wait: parameters", () => {
  it("needs 1–32 distinct task ids and a timeout of 0–60 s", async () => {
    fakes();
    const req = requesterKey("wait-params");
    const missing = await wait(req, {});
    expect([missing.status, missing.body.error.message]).toEqual([400, "taskIds required"]);
    expect((await wait(req, { taskIds: [" ", ""] })).body.error.message).toBe("taskIds required");
    const many = Array.from({ length: 33 }, () => newTaskId(req));
    expect((await wait(req, { taskIds: many })).body.error.message).toBe("subagents wait supports at most 32 taskIds.");
    // Duplicates count once: 33 entries naming 32 ids is accepted.
    const ok = await wait(req, { taskIds: [...many.slice(0, 32), many[0]], timeoutSeconds: 0 });
    expect(ok.status).toBe(200);
    expect(ok.details.unavailable).toHaveLength(32);
    expect((await wait(req, { taskIds: many.slice(0, 1), timeoutSeconds: 61 })).status).toBe(400);
    expect((await wait(req, { taskIds: many.slice(0, 1), timeoutSeconds: -1 })).status).toBe(400);
    expect((await wait(req, { taskIds: many.slice(0, 1), timeout_seconds: 2.5 })).status).toBe(400);
  });
});

describe("subagents wait: reasons", () => {
  it("timeoutSeconds 0 reads a snapshot: an open task gives reason timeout", async () => {
    fakes();
    const req = requesterKey("wait-snap");
    const slow = await spawn(req, { task: "slow work" });
    const r = await wait(req, { taskIds: [slow.taskId], timeoutSeconds: 0 });
    expect(Object.keys(r.details)).toEqual(["status", "action", "reason", "tasks", "completed", "attention"]);
    expect(r.details).toMatchObject({ status: "ok", action: "wait", reason: "timeout", completed: [], attention: [] });
    expect(r.details.tasks).toHaveLength(1);
    expect(r.details.tasks[0]).toMatchObject({ taskId: slow.taskId, runtime: "subagent" });
    expect(["queued", "running"]).toContain(r.details.tasks[0].status);
  });

  it("an id outside the caller's tree makes the wait return at once as unavailable, before anything completed", async () => {
    fakes();
    const req = requesterKey("wait-unavail");
    const other = requesterKey("wait-other");
    const done = await spawn(req, { task: "quick" });
    await settle(done.childSessionKey);
    const foreign = await spawn(other, { task: "slow foreign" });
    const r = await wait(req, { taskIds: [done.taskId, foreign.taskId], timeoutSeconds: 60 });
    expect(r.details).toMatchObject({
      reason: "unavailable",
      completed: [done.taskId],
      unavailable: [foreign.taskId],
    });
    expect(r.details.tasks.map((t: any) => t.taskId)).toEqual([done.taskId]);
  });

  it("returns when a waited task ends, with its snapshot; the other tasks stay open", async () => {
    fakes();
    const req = requesterKey("wait-end");
    const a = await spawn(req, { task: "slow a", runTimeoutSeconds: 5 });
    const b = await spawn(req, { task: "slow b" });
    const pending = wait(req, { taskIds: [a.taskId, b.taskId], timeoutSeconds: 60 });
    await attached(req);
    await advance(a.childSessionKey, 5_000);
    const r = await pending;
    expect(r.details).toMatchObject({ reason: "completed", completed: [a.taskId], attention: [] });
    expect(r.details.tasks.map((t: any) => [t.taskId, t.status])).toEqual([
      [a.taskId, "timed_out"],
      [b.taskId, expect.stringMatching(/^(queued|running)$/)],
    ]);
  });

  it("times out with reason timeout when nothing ends", async () => {
    fakes();
    const req = requesterKey("wait-timeout");
    const slow = await spawn(req, { task: "slow forever" });
    const started = Date.now();
    const r = await wait(req, { taskIds: [slow.taskId], timeoutSeconds: 1 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(r.details).toMatchObject({ reason: "timeout", completed: [] });
  });

  it("a succeeded task whose result never reached its requester needs attention, which ranks above completed", async () => {
    fakes();
    const req = requesterKey("wait-attn");
    const done = await spawn(req, { task: "quick" });
    await settle(done.childSessionKey);
    await runInDurableObject(sessionStub(req), (_obj, state) => {
      state.storage.sql.exec("UPDATE tasks SET terminal_outcome = 'blocked', delivery_status = 'failed'");
    });
    const r = await wait(req, { taskIds: [done.taskId] });
    expect(r.details).toMatchObject({ reason: "attention", completed: [done.taskId], attention: [done.taskId] });
    expect(r.details.tasks[0]).toMatchObject({ status: "blocked", deliveryStatus: "failed" });
  });
});

describe("subagents wait: restarts", () => {
  it("re-attaches when the owner restarts mid-wait, and returns the end that came after", async () => {
    fakes();
    const req = requesterKey("wait-evict");
    const slow = await spawn(req, { task: "slow resilient", runTimeoutSeconds: 5 });
    const pending = wait(req, { taskIds: [slow.taskId], timeoutSeconds: 60 });
    await attached(req);
    // The owner's instance ends with the wait in it (its memory is lost; its rows stay).
    await crash(sessionStub(req));
    await attached(req);
    await advance(slow.childSessionKey, 5_000);
    const r = await pending;
    expect(r.details).toMatchObject({ reason: "completed", completed: [slow.taskId] });
    expect(r.details.tasks[0]).toMatchObject({ status: "timed_out", error: "Run timed out after 5s" });
    expect(await ledgerOf(req)).toMatchObject([{ taskId: slow.taskId, status: "timed_out" }]);
  });
});

import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionObject } from "../../src/session/session-object";
import { buildTree, cascadeEnded, drive, expectAllCancelledOnce, treeFakes } from "../helpers/cascade";
import { advance, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { childState, releaseAndSettleChildren, requesterKey } from "../helpers/subagents";

/**
 * Cancelling a sub-agent and all its descendants across session objects (src/tasks/task-cancel.ts): a
 * three-level tree (P → C1, C2 → G1, G2), every object crashed right after the cancel — wherever the cascade
 * then stood — and driven by its alarms only. Nothing is repeated, nothing lost: every descendant's run
 * aborted, every task `cancelled` with "Cancelled by operator.", every parent told once, no model step.
 */

afterEach(releaseAndSettleChildren);

describe("subagents cancel: a three-level tree", () => {
  it("cancels every descendant exactly once, across crashes of every object mid-cascade", async () => {
    const fake = treeFakes();
    const req = requesterKey("cascade");
    const { p, tree } = await buildTree(req);
    const stepsBefore = fake.model.length;

    const r = await invoke("subagents", { action: "cancel", taskId: p.taskId }, { sessionKey: req });
    expect(r.details).toEqual({ status: "cancelled", taskId: p.taskId, found: true, cancelled: true });
    // Every object of the tree loses its instance wherever the cascade stands; only rows remain.
    await crash(...[req, ...tree].map(sessionStub));
    await drive(() => [req, ...tree], cascadeEnded(req, tree));
    await expectAllCancelledOnce(req, tree);
    // No model ran for the cancelled tree (no announce steps, no retried tasks).
    expect(fake.model.slice(stepsBefore)).toEqual([]);
  });

  it("a cascade step that fails half-way is retried from its timer after a crash, without repeating its effects", async () => {
    const fake = treeFakes();
    const req = requesterKey("cascade-retry");
    const { p, tree } = await buildTree(req);
    const [, c1] = tree;
    const stepsBefore = fake.model.length;
    // The first abort of C1's run fails, as if C1 were evicted between its cancelTree and the abort.
    const original = SessionObject.prototype.abortRun;
    let failed = 0;
    const spy = vi.spyOn(SessionObject.prototype, "abortRun").mockImplementation(async function (
      this: SessionObject,
      runId: string,
    ) {
      if (this.key === c1 && failed === 0) {
        failed++;
        throw new Error("test: evicted mid-step");
      }
      return original.call(this, runId);
    });
    await invoke("subagents", { action: "cancel", taskId: p.taskId }, { sessionKey: req });
    await vi.waitFor(() => expect(failed).toBe(1), { timeout: 10_000, interval: 10 });
    // P keeps the failed step as a timer row with its attempt counted; then P and C1 lose their instances.
    await vi.waitFor(
      async () => {
        const step = (await childState(p.childSessionKey)).timers.find((t) => t.kind === "task-cancel");
        expect(step).toBeDefined();
      },
      { timeout: 10_000, interval: 10 },
    );
    await crash(sessionStub(p.childSessionKey), sessionStub(c1));
    const ended = cascadeEnded(req, tree);
    for (let i = 0; i < 10 && !(await ended()); i++) {
      // The retry waits for its backoff: move P's clock past it.
      await advance(p.childSessionKey, 60_000);
      for (const k of [req, ...tree]) await runDurableObjectAlarm(sessionStub(k));
    }
    spy.mockRestore();
    expect(await ended()).toBe(true);
    await expectAllCancelledOnce(req, tree);
    expect(fake.model.slice(stepsBefore)).toEqual([]);
  });
});

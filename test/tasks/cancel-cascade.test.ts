import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { SessionObject } from "../../src/session/session-object";
import { advance, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import {
  announcesIn,
  childState,
  installFakes,
  type ModelAnswer,
  type ModelCall,
  releaseAndSettleChildren,
  requesterKey,
  subagentConfig,
} from "../helpers/subagents";
import { ledgerOf, type Spawned, spawn } from "../helpers/tasks";

/**
 * Cancelling a sub-agent and all its descendants across session objects (src/tasks/task-cancel.ts): a
 * three-level tree (P → C1, C2 → G1, G2), every object crashed right after the cancel — wherever the cascade
 * then stood — and driven by its alarms only. Nothing is repeated, nothing lost: every descendant's run
 * aborted, every task `cancelled` with "Cancelled by operator.", every parent told once, no model step.
 */

afterEach(releaseAndSettleChildren);

/** The orchestrator spawns two branches, each branch one leaf; then every task hangs until aborted. */
function treeFakes() {
  setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 3 } }));
  const calls = new Map<string, number>();
  const plan: Record<string, string[]> = {
    "orchestrate P": ["branch C1", "branch C2"],
    "branch C1": ["leaf G1"],
    "branch C2": ["leaf G2"],
  };
  return installFakes((c: ModelCall): ModelAnswer => {
    if (c.step !== "task") return "notes";
    const task = Object.keys(plan).find((t) => c.lastUser.includes(`[Subagent Task]: ${t}`));
    if (!task) return "hang";
    const n = calls.get(task) ?? 0;
    calls.set(task, n + 1);
    const next = plan[task][n];
    return next ? { toolCall: { name: "sessions_spawn", args: { task: next } } } : "hang";
  });
}

async function childrenOf(key: string): Promise<string[]> {
  return (await childState(key)).flows.filter((f) => f.id.startsWith("child:")).map((f) => f.id.slice(6));
}

/** Run every session's due timers until `done` holds (bounded rounds; time is driven, never slept). */
async function drive(keys: () => string[], done: () => Promise<boolean>, rounds = 40): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    if (await done()) return;
    for (const k of keys()) await runDurableObjectAlarm(sessionStub(k));
  }
  expect(await done()).toBe(true);
}

/** Spawn the tree and wait until every branch and leaf runs and has reported to its parent's ledger. */
async function buildTree(req: string): Promise<{ p: Spawned; tree: string[] }> {
  const p: Spawned = await spawn(req, { task: "orchestrate P" });
  const tree: string[] = [];
  await vi.waitFor(
    async () => {
      const branches = await childrenOf(p.childSessionKey);
      const leaves = (await Promise.all(branches.map(childrenOf))).flat();
      tree.splice(0, tree.length, p.childSessionKey, ...branches, ...leaves);
      for (const k of tree) await runDurableObjectAlarm(sessionStub(k));
      const rows = (await Promise.all([req, p.childSessionKey, ...branches].map(ledgerOf))).flat();
      if (tree.length !== 5 || rows.length !== 5 || rows.some((r) => r.status !== "running"))
        throw new Error(`tree not built: ${tree.length} sessions, ${JSON.stringify(rows)}`);
    },
    { timeout: 15_000, interval: 50 },
  );
  return { p, tree };
}

/** Every run of the tree ended and every ledger row of it cancelled and delivered (no cascade or report timer left). */
function cascadeEnded(req: string, tree: string[]) {
  return async () => {
    const states = await Promise.all(tree.map(childState));
    const rows = (await Promise.all([req, ...tree].map(ledgerOf))).flat();
    return (
      states.every(
        (s) =>
          s.pendingRuns.length === 0 && !s.timers.some((t) => t.kind === "task-cancel" || t.kind === "task-report"),
      ) && rows.every((t) => t.status === "cancelled" && t.deliveryStatus !== "pending")
    );
  };
}

/** The end state both tests prove: nothing repeated, nothing lost. */
async function expectAllCancelledOnce(req: string, tree: string[]): Promise<void> {
  const rows = (await Promise.all([req, ...tree].map(ledgerOf))).flat();
  expect(rows).toHaveLength(5);
  for (const t of rows) expect(t).toMatchObject({ status: "cancelled", error: "Cancelled by operator." });
  for (const k of tree) {
    const s = await childState(k);
    expect(s.runs.filter((run) => run.kind === "subagent_task").map((run) => run.status)).toEqual(["aborted"]);
    expect(s.meta.subagent).toMatchObject({ status: "killed", cancelled: { reason: "Cancelled by operator." } });
    // Told once: exactly one announce of this session in its parent's transcript.
    const told = await announcesIn(s.meta.subagent.requesterKey, k);
    expect(told).toHaveLength(1);
    expect(told[0].text).toContain("cancelled: Cancelled by operator.");
    expect(s.timers.filter((t) => t.kind === "task-cancel" || t.kind === "task-report")).toEqual([]);
  }
}

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

import { runDurableObjectAlarm } from "cloudflare:test";
import { expect, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { sessionStub } from "./http";
import { announcesIn, childState, installFakes, type ModelAnswer, type ModelCall, subagentConfig } from "./subagents";
import { ledgerOf, type Spawned, spawn } from "./tasks";

/**
 * A three-level sub-agent tree to cancel (P → C1, C2 → G1, G2; src/tasks/task-cancel.ts), and what a cancel
 * of it must leave: every run aborted, every task `cancelled` once, every parent told once. Used by the
 * ledger's own cancel (test/tasks/cancel-cascade.test.ts) and by the protocols' (test/http/mcp-task-cascade.test.ts).
 */

/** The orchestrator spawns two branches, each branch one leaf; then every task hangs until aborted. */
export function treeFakes() {
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

export async function childrenOf(key: string): Promise<string[]> {
  return (await childState(key)).flows.filter((f) => f.id.startsWith("child:")).map((f) => f.id.slice(6));
}

/** Run every session's due timers until `done` holds (bounded rounds; time is driven, never slept). */
export async function drive(keys: () => string[], done: () => Promise<boolean>, rounds = 40): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    if (await done()) return;
    for (const k of keys()) await runDurableObjectAlarm(sessionStub(k));
  }
  expect(await done()).toBe(true);
}

/**
 * Spawn the tree (P through `spawnP`, by default sessions_spawn over /tools/invoke) and wait until every
 * branch and leaf runs and has reported to its parent's ledger.
 */
export async function buildTree(
  req: string,
  spawnP: () => Promise<Spawned> = () => spawn(req, { task: "orchestrate P" }),
): Promise<{ p: Spawned; tree: string[] }> {
  const p: Spawned = await spawnP();
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
export function cascadeEnded(req: string, tree: string[]) {
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
export async function expectAllCancelledOnce(req: string, tree: string[]): Promise<void> {
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

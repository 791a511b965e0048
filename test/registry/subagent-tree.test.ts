import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { FAKE_BASE_URL, useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";

/**
 * `GET /v1/sessions/{key}/tree` (src/registry/subagent-tree.ts): the console's sub-agent tree — a session,
 * its children and theirs, each with status, run time, tokens and cost.
 */

const uniq = (p: string) => `agent:main:${p}-${crypto.randomUUID().slice(0, 8)}`;

async function spawnFrom(requester: string, task: string, extra: Record<string, unknown> = {}) {
  const r = await invoke("sessions_spawn", { task, ...extra }, { sessionKey: requester });
  expect(r.details.status).toBe("accepted");
  expect((await sessionStub(r.details.childSessionKey).waitRun(r.details.runId, 10_000))?.status).toBe("ok");
  return r.details.childSessionKey as string;
}

/** The tree once the index lists `count` nodes (index rows are written behind each session's change). */
async function treeOf(key: string, count: number, token?: string) {
  let tree: any;
  await vi.waitFor(
    async () => {
      const r = await call("GET", `/v1/sessions/${enc(key)}/tree`, undefined, token ? { token } : {});
      expect(r.status).toBe(200);
      tree = r.json;
      expect(tree.nodes).toHaveLength(count);
    },
    { timeout: 10_000, interval: 50 },
  );
  return tree;
}

describe("a session's sub-agent tree", () => {
  it("lists the children and grandchildren level by level, with status, run time and tokens", async () => {
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo", subagents: { maxSpawnDepth: 2 } },
        list: [{ id: "main", default: true }, { id: "research" }],
      },
    });
    const root = uniq("tree");
    await sendAndWait(root, "start");
    const a = await spawnFrom(root, "survey A", { label: "A" });
    const b = await spawnFrom(root, "survey B", { label: "B" });
    // A is an orchestrator (depth 1 of 2): it spawns a child of its own.
    const a1 = await spawnFrom(a, "detail of A", { label: "A.1" });

    const tree = await treeOf(root, 4);
    expect(tree.sessionKey).toBe(root);
    expect(tree.truncated).toBe(false);
    const shape = tree.nodes.map((n: any) => [n.key, n.parentKey, n.depth, n.label ?? null]);
    expect(shape[0]).toEqual([root, null, 0, null]);
    expect(shape.slice(1, 3)).toEqual(
      expect.arrayContaining([
        [a, root, 1, "A"],
        [b, root, 1, "B"],
      ]),
    );
    expect(shape[3]).toEqual([a1, a, 2, "A.1"]);
    for (const n of tree.nodes.slice(1)) {
      expect(n.agentId).toBe("main");
      expect(typeof n.status).toBe("string");
      expect(n.startedAt).toBeGreaterThan(0);
      expect(n.costUsd).toBeNull(); // builtin/echo has no prices
    }
    await vi.waitFor(async () => {
      const t = await treeOf(root, 4);
      for (const n of t.nodes.slice(1)) {
        expect(n.totalTokens).toBeGreaterThan(0);
        expect(n.runtimeMs).toBeGreaterThanOrEqual(0);
      }
    });
    // A child is a tree root too.
    expect((await treeOf(a, 2)).nodes.map((n: any) => n.key)).toEqual([a, a1]);
  });

  it("estimates each node's cost from its model's prices", async () => {
    useFakeProvider({
      auto: (c) => c.reply("done", { prompt: 1000, completion: 500 }),
      extraConfig: {
        models: {
          providers: {
            fake: { baseUrl: FAKE_BASE_URL, apiKey: "k", models: [{ id: "m1", cost: { input: 2, output: 4 } }] },
          },
        },
      },
    });
    const root = uniq("priced");
    await sendAndWait(root, "start");
    const child = await spawnFrom(root, "priced task");
    await vi.waitFor(
      async () => {
        const tree = await treeOf(root, 2);
        const node = tree.nodes.find((n: any) => n.key === child);
        expect(node.inputTokens).toBeGreaterThanOrEqual(1000);
        expect(node.costUsd).toBeCloseTo((node.inputTokens * 2 + node.outputTokens * 4) / 1_000_000, 10);
        expect(node.costUsd).toBeGreaterThan(0);
      },
      { timeout: 10_000, interval: 50 },
    );
  });

  it("an agent token sees its own agent's nodes; another agent's session is a 403; a missing one a 404", async () => {
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo", subagents: { allowAgents: ["research"] } },
        list: [{ id: "main", default: true }, { id: "research" }],
      },
    });
    const root = uniq("mixed");
    await sendAndWait(root, "start");
    const own = await spawnFrom(root, "own agent");
    const other = await spawnFrom(root, "other agent", { agentId: "research" });
    expect(other).toMatch(/^agent:research:subagent:/);

    const operator = await treeOf(root, 3);
    expect(operator.nodes.map((n: any) => n.key).sort()).toEqual([root, own, other].sort());
    const mainToken = await treeOf(root, 2, MAIN_TOKEN);
    expect(mainToken.nodes.map((n: any) => n.key).sort()).toEqual([root, own].sort());
    expect((await call("GET", `/v1/sessions/${enc(root)}/tree`, undefined, { token: RESEARCH_TOKEN })).status).toBe(
      403,
    );
    const missing = await call("GET", `/v1/sessions/${enc(uniq("nobody"))}/tree`);
    expect([missing.status, missing.json.error.type]).toEqual([404, "not_found"]);
  });
});

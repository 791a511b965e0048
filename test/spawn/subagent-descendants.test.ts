import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { DESCENDANT_WAIT_MAX_MS } from "../../src/spawn/subagent-lifecycle";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import {
  announcesIn,
  childState,
  installFakes,
  isOwnAnnounceFlow,
  type ModelAnswer,
  type ModelCall,
  releaseHangingRequests,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * OpenClaw's descendant wait, rewritten for our design (docs/subagents.md): a sub-agent whose task run ends while its own children
 * still run defers its announce (a "waiting" flow row), resumes in the transaction that ends its last
 * child's slot, and announces with every direct child's output in creation order; children deleted
 * before they reported are left out. A NO_REPLY after the wait does not swallow the results.
 */

interface ChildPlan {
  task: string;
  label?: string;
  runTimeoutSeconds?: number;
  /** What the child's task run answers. */
  answer: ModelAnswer;
}

const PARENT_TASK = "orchestrate the survey";

/**
 * A requester spawns a parent sub-agent (depth 1 of 2) whose model spawns `children` one tool call at a
 * time, then answers `parentReply`. Returns once the parent's task run has ended, with the children's
 * keys in creation order.
 */
async function orchestrate(children: ChildPlan[], opts: { parentReply?: string; parentAnnounce?: ModelAnswer } = {}) {
  // No tool allowance needed: at depth 1 of 2 the parent is an orchestrator and keeps sessions_spawn.
  setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 2 } }));
  let parentCalls = 0;
  const fakes = installFakes((c: ModelCall): ModelAnswer => {
    if (c.step === "announce")
      return c.system.includes(`Task: ${PARENT_TASK}`) ? (opts.parentAnnounce ?? "parent notes") : "child notes";
    if (c.step !== "task") return "hi";
    if (c.lastUser.includes(`[Subagent Task]: ${PARENT_TASK}`)) {
      const next = children[parentCalls++];
      if (!next) return opts.parentReply ?? "parent summary";
      const { answer: _answer, ...args } = next;
      return { toolCall: { name: "sessions_spawn", args } };
    }
    const plan = children.find((p) => c.lastUser.includes(`[Subagent Task]: ${p.task}`));
    if (!plan) throw new Error(`unexpected task ${c.lastUser}`);
    return plan.answer;
  });
  const req = requesterKey("orchestrator");
  const r = await invoke("sessions_spawn", { task: PARENT_TASK }, { sessionKey: req });
  expect(r.details.status).toBe("accepted");
  const parent: string = r.details.childSessionKey;
  const done = await sessionStub(parent).waitRun(r.details.runId, 10_000);
  expect(done?.status).toBe("ok");
  const kids = (await childState(parent)).flows
    .filter((f) => f.id.startsWith("child:"))
    .map((f) => f.id.slice("child:".length));
  expect(kids).toHaveLength(children.length);
  return { req, parent, kids, fakes };
}

function announceFlow(s: Awaited<ReturnType<typeof childState>>) {
  return s.flows.find((f) => isOwnAnnounceFlow(f.id));
}

function finding(i: number, key: string, label: string, status: string, result?: string): string {
  const head = `${i}. ${key} (${label})\nstatus: ${status}`;
  return result === undefined
    ? head
    : `${head}\n<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>\n${result}\n<<<END_UNTRUSTED_CHILD_RESULT>>>`;
}

describe("a parent sub-agent and its own children", () => {
  it("defers its announce while a child runs, then announces all direct-child outputs in creation order", async () => {
    // The first child is slow (it times out at 5 s); the second finishes at once: completion order B, A.
    const { req, parent, kids, fakes } = await orchestrate([
      { task: "scan region A", runTimeoutSeconds: 5, answer: "hang" },
      { task: "scan region B", label: "B", answer: "region B: 3 sites" },
    ]);
    const [childA, childB] = kids;
    await settle(childB);

    // The parent's run is over but one child still runs: no announce yet, the flow waits with a cap timer.
    const waiting = await childState(parent);
    expect(announceFlow(waiting)!.state).toBe("waiting");
    expect(waiting.timers.map((t) => t.kind)).toContain("subagent-descendants");
    expect(waiting.timers.map((t) => t.kind)).not.toContain("subagent-announce");
    expect(await announcesIn(req)).toEqual([]);
    // B's announce reached the parent's transcript while it waited.
    expect((await announcesIn(parent, childB))[0].text).toContain("Result: region B: 3 sites");

    // The last child ends: its announce moves the parent on.
    await advance(childA, 5_000);
    await settle(childA);
    const after = await settle(parent);
    expect(announceFlow(after)!.state).toBe("done");
    expect(after.timers.map((t) => t.kind)).not.toContain("subagent-descendants");
    await runDurableObjectAlarm(sessionStub(req));

    const announces = await announcesIn(req, parent);
    expect(announces).toHaveLength(1);
    const text = announces[0].text;
    const expectedResult = [
      "Result: parent summary",
      "Child completion results:",
      finding(1, childA, "scan region A", "timed out", "(no output)"),
      finding(2, childB, "B", "completed successfully", "region B: 3 sites"),
    ].join("\n\n");
    expect(
      text.startsWith(`Status: completed successfully\n${expectedResult}\nNotes: parent notes\nStats: runtime `),
    ).toBe(true);

    // The parent's announce step was told it waited and saw its children's results.
    const step = fakes.model.filter((c) => c.step === "announce" && c.system.includes(`Task: ${PARENT_TASK}`));
    expect(step).toHaveLength(1);
    expect(step[0].system).toContain(
      "[Subagent Context] Your prior run ended while waiting for descendant subagent completions",
    );
    expect(step[0].system).toContain("region B: 3 sites");
  });

  it("a child that reports before or after its parent's run ends is in the parent's announce either way", async () => {
    const { req, parent, kids } = await orchestrate([{ task: "quick job", answer: "quick result" }]);
    await settle(kids[0]);
    const s = await settle(parent);
    expect(announceFlow(s)!.state).toBe("done");
    await runDurableObjectAlarm(sessionStub(req));
    const [a] = await announcesIn(req, parent);
    expect(a.text).toContain(
      `Child completion results:\n\n${finding(1, kids[0], "quick job", "completed successfully", "quick result")}`,
    );
  });

  it("a child deleted before it reported is left out, and its deletion releases the wait", async () => {
    const { req, parent, kids } = await orchestrate([
      { task: "doomed job", answer: "hang" },
      { task: "good job", answer: "good result" },
    ]);
    await settle(kids[1]);
    expect(announceFlow(await childState(parent))!.state).toBe("waiting");

    expect((await call("DELETE", `/v1/sessions/${enc(kids[0])}`)).status).toBe(200);
    await settle(parent);
    await runDurableObjectAlarm(sessionStub(req));
    const [a] = await announcesIn(req, parent);
    expect(a.text).toContain(
      `Child completion results:\n\n${finding(1, kids[1], "good job", "completed successfully", "good result")}\nNotes:`,
    );
    expect(a.text).not.toContain(kids[0]);
  });

  it("the wait survives eviction: the waiting flow and the child's hand-off are rows, not memory", async () => {
    const { req, parent, kids } = await orchestrate([{ task: "slow job", runTimeoutSeconds: 5, answer: "hang" }]);
    expect(announceFlow(await childState(parent))!.state).toBe("waiting");
    await crash(...[req, parent, ...kids].map(sessionStub));
    releaseHangingRequests();
    // The lost child run is noticed by its lease or deadline; either way it ends and announces.
    for (let i = 0; i < 10 && announceFlow(await childState(kids[0]))?.state !== "done"; i++) {
      await advance(kids[0], 60_000);
      for (const id of (await childState(kids[0])).pendingRuns) await sessionStub(kids[0]).waitRun(id, 5_000);
    }
    await settle(kids[0]);
    await settle(parent);
    await runDurableObjectAlarm(sessionStub(req));
    const announces = await announcesIn(req, parent);
    expect(announces).toHaveLength(1);
    expect(announces[0].text).toContain(`1. ${kids[0]} (slow job)\nstatus: `);
  });

  it("never waits forever: at the cap the parent announces, listing the child still running; the child's late announce adds nothing upstream", async () => {
    const { req, parent, kids } = await orchestrate([
      { task: "endless job", runTimeoutSeconds: 7 * 3600, answer: "hang" },
    ]);
    expect(announceFlow(await childState(parent))!.state).toBe("waiting");
    await advance(parent, DESCENDANT_WAIT_MAX_MS - 60_000);
    expect(announceFlow(await childState(parent))!.state).toBe("waiting");
    await advance(parent, 60_000);
    await settle(parent);
    await runDurableObjectAlarm(sessionStub(req));
    const first = await announcesIn(req, parent);
    expect(first).toHaveLength(1);
    expect(first[0].text).toContain(
      `Child completion results:\n\n1. ${kids[0]} (endless job)\nstatus: still running (no result before this announce)`,
    );

    await advance(kids[0], 7 * 3600_000);
    await settle(kids[0]);
    expect(await announcesIn(parent, kids[0])).toHaveLength(1);
    await runDurableObjectAlarm(sessionStub(req));
    expect(await announcesIn(req, parent)).toHaveLength(1);
  });

  it("NO_REPLY from the announce step after the wait still announces (without notes); ANNOUNCE_SKIP stays silent", async () => {
    const quiet = await orchestrate([{ task: "slow job", runTimeoutSeconds: 5, answer: "hang" }], {
      parentAnnounce: "NO_REPLY",
    });
    await advance(quiet.kids[0], 5_000);
    await settle(quiet.kids[0]);
    await settle(quiet.parent);
    await runDurableObjectAlarm(sessionStub(quiet.req));
    const [a] = await announcesIn(quiet.req, quiet.parent);
    expect(a.text).toContain("status: timed out");
    expect(a.text).not.toContain("Notes:");
    releaseHangingRequests();
    vi.restoreAllMocks();

    const skip = await orchestrate([{ task: "slow job", runTimeoutSeconds: 5, answer: "hang" }], {
      parentAnnounce: "ANNOUNCE_SKIP",
    });
    await advance(skip.kids[0], 5_000);
    await settle(skip.kids[0]);
    const s = await settle(skip.parent);
    expect(announceFlow(s)!.state).toBe("done");
    await runDurableObjectAlarm(sessionStub(skip.req));
    expect(await announcesIn(skip.req, skip.parent)).toEqual([]);
  });
});

describe("timeout amid tool calls", () => {
  it("reports partial progress: the tool calls made before the deadline and the latest tool result", async () => {
    setConfigOverride(subagentConfig({ tools: { subagents: { tools: { allow: ["agents_list"] } } } }));
    // The tool call happens, then the model hangs until the deadline.
    let hung!: () => void;
    const working = new Promise<void>((resolve) => (hung = resolve));
    installFakes((c) => {
      if (c.step !== "task") return c.step === "announce" ? "" : "hi";
      if (!c.hasToolResult) return { toolCall: { name: "agents_list", args: {} } };
      hung();
      return "hang";
    });
    const req = requesterKey("partial");
    const r = await invoke("sessions_spawn", { task: "inventory", runTimeoutSeconds: 5 }, { sessionKey: req });
    const child: string = r.details.childSessionKey;
    await working;
    // Progress is visible while the run goes on: the finished step is already in the child's history.
    const during = await invoke("sessions_history", { sessionKey: child, includeTools: true }, { sessionKey: req });
    expect(during.details.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "toolResult"]);
    await advance(child, 5_000);
    await settle(child);
    const [a] = await announcesIn(req, child);
    expect(a.text.split("\n").slice(0, 3)).toEqual([
      "Status: timed out",
      "Result: [Partial progress: 1 tool call(s) executed before timeout]",
      'Latest tool result: {"requester":"main","allowAny":false,"agents":[{"id":"main","configured":true}]}',
    ]);
  });
});

import { TaskState } from "@a2a-js/sdk";
import type { Client as A2AClient } from "@a2a-js/sdk/client";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { a2aClient, textMessage } from "../helpers/a2a";
import { type FakeCall, useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke } from "../helpers/http";
import { taskCall, v1Client } from "../helpers/mcp-client";
import { answerAllAndQuiesce } from "../helpers/quiesce";
import { runEndEvents } from "../helpers/tasks";

/**
 * One handle (docs/protocols.md, "One handle"): a run started through any protocol — OpenClaw's /tools/invoke,
 * REST, MCP (the SDK's client, task-augmented) or A2A (the official A2A client) — is the same id on every other
 * surface, each reports the same state, and an abort through any one of them ends it once: every surface then
 * reports the same terminal state, a second abort anywhere is a no-op answer, and the run's session records
 * one end.
 */

let fake: ReturnType<typeof useFakeProvider> | undefined;

afterEach(async () => {
  const f = fake;
  fake = undefined;
  if (f) await answerAllAndQuiesce(f);
});

const tag = () => crypto.randomUUID().slice(0, 8);

interface Surfaces {
  mcp: Client;
  a2a: A2AClient;
  req: string;
}

/** The run as each surface reports it: REST's status, the MCP task's, the A2A task's. */
async function seen(s: Surfaces, runId: string) {
  const rest = (await call("GET", `/v1/runs/${runId}`)).json;
  const mcp = await s.mcp.experimental.tasks.getTask(runId);
  const a2a = await s.a2a.getTask({ tenant: "", id: runId });
  expect(mcp.taskId).toBe(runId);
  expect(a2a.id).toBe(runId);
  return { rest: rest.status as string, mcp: mcp.status, a2a: a2a.status?.state, run: rest };
}

type Abort = "a2a" | "mcp" | "rest" | "tools";

/** Abort through one surface; a spawn's run over /tools/invoke is `subagents cancel` of the task it names. */
async function abortVia(s: Surfaces, how: Abort, runId: string): Promise<unknown> {
  switch (how) {
    case "a2a":
      return s.a2a.cancelTask({ tenant: "", id: runId, metadata: undefined }).then((t) => t.status?.state);
    case "mcp":
      return s.mcp.experimental.tasks.cancelTask(runId).then((t) => t.status);
    case "rest": {
      const r = await call("POST", `/v1/runs/${runId}/abort`);
      return `${r.status} ${r.json.status}`;
    }
    case "tools": {
      const taskId = (await call("GET", `/v1/runs/${runId}`)).json.taskId;
      return (await invoke("subagents", { action: "cancel", taskId }, { sessionKey: s.req })).details;
    }
  }
}

/** What a second abort through each surface answers once the run ended aborted: a no-op, never a second end. */
const SECOND_ABORT: Record<Abort, RegExp> = {
  a2a: /already ended \(aborted\)/,
  mcp: /Cannot cancel task: already in terminal status cancelled/,
  rest: /^200 aborted$/,
  tools: /Task is already terminal\./,
};

describe("one handle: a run started anywhere is seen and aborted everywhere, once", () => {
  it("runs started via /tools/invoke, REST, MCP and A2A: the same id on every surface, one abort, one end", async () => {
    fake = useFakeProvider({ extraConfig: { tools: { sessions: { visibility: "agent" } } } });
    const req = `agent:main:one-handle-${tag()}`;
    const s: Surfaces = { mcp: await v1Client(req), a2a: await a2aClient("main"), req };

    // Four runs, one per protocol, each held by the model until aborted.
    const viaTools = (
      await invoke(
        "sessions_send",
        { sessionKey: `agent:main:one-handle-target-${tag()}`, message: "hold via tools", timeoutSeconds: 0 },
        { sessionKey: req },
      )
    ).details.runId as string;
    const restKey = `agent:main:one-handle-rest-${tag()}`;
    const viaRest = (await call("POST", `/v1/sessions/${enc(restKey)}/messages`, { message: "hold via rest" })).json
      .runId as string;
    const viaMcp = (await taskCall(s.mcp, "sessions_spawn", { task: "hold via mcp" })).task.taskId;
    const a2aTask = await s.a2a.sendMessage(textMessage("hold via a2a", { returnImmediately: true }));
    if (!("id" in a2aTask)) throw new Error("expected a task");
    const viaA2a = a2aTask.id;
    await vi.waitFor(() =>
      expect(
        ["hold via tools", "hold via rest", "hold via mcp", "hold via a2a"].every((m) =>
          fake!.pending().some((c: FakeCall) => c.lastUser.includes(m)),
        ),
      ).toBe(true),
    );

    // Read through every surface: the same run, running everywhere.
    for (const id of [viaTools, viaRest, viaMcp, viaA2a])
      expect(await seen(s, id)).toMatchObject({
        rest: "running",
        mcp: "working",
        a2a: TaskState.TASK_STATE_WORKING,
        run: { runId: id },
      });
    // The spawn's run names its ledger task, which /tools/invoke's `subagents` and REST's /v1/tasks show.
    const spawnRun = (await call("GET", `/v1/runs/${viaMcp}`)).json;
    expect(spawnRun).toMatchObject({ kind: "subagent_task", taskId: expect.any(String) });
    const listed = (await invoke("subagents", { action: "list" }, { sessionKey: req })).details;
    expect(listed.active.map((r: { runId: string }) => r.runId)).toEqual([viaMcp]);

    // Each run aborted through a surface other than the one that started it.
    const plan: [string, Abort, unknown][] = [
      [viaTools, "a2a", TaskState.TASK_STATE_CANCELED],
      [viaRest, "mcp", "cancelled"],
      [viaMcp, "tools", { status: "cancelled", found: true, cancelled: true }],
      [viaA2a, "rest", "200 aborted"],
    ];
    for (const [id, how, answer] of plan) {
      expect(await abortVia(s, how, id)).toMatchObject(answer as object);
      const after = await seen(s, id);
      expect(after).toMatchObject({ rest: "aborted", mcp: "cancelled", a2a: TaskState.TASK_STATE_CANCELED });
      // A second abort through every surface: a no-op answer that leaves the run as it ended.
      for (const again of ["a2a", "mcp", "rest", "tools"] as const) {
        if (again === "tools" && id !== viaMcp) continue; // only a sub-agent's run has a task /tools/invoke cancels
        const said = await abortVia(s, again, id).then(
          (v) => (typeof v === "string" ? v : JSON.stringify(v)),
          (e: unknown) => String(e),
        );
        expect(said).toMatch(SECOND_ABORT[again]);
      }
      expect((await call("GET", `/v1/runs/${id}`)).json).toEqual(after.run);
      expect(await runEndEvents(after.run.sessionKey, id)).toEqual(["aborted"]);
    }
    // /tools/invoke's `subagents list` shows the spawn's run killed; its requester's ledger and the MCP task list cancelled.
    const recent = (await invoke("subagents", { action: "list" }, { sessionKey: req })).details.recent;
    expect(recent.map((r: { runId: string; status: string }) => [r.runId, r.status])).toEqual([[viaMcp, "killed"]]);
    expect((await call("GET", `/v1/tasks/${spawnRun.taskId}`)).json).toMatchObject({ status: "cancelled" });
    // The requester's fire-and-forget send is a ledger task too (docs/tasks.md), recorded after the spawn's.
    expect((await s.mcp.experimental.tasks.listTasks()).tasks).toEqual([
      expect.objectContaining({ taskId: viaTools, status: "cancelled" }),
      expect.objectContaining({ taskId: viaMcp, status: "cancelled" }),
    ]);
    await s.mcp.close();
  });

  it("a spawn's run aborted through every surface at once ends once: one end event, its ledger task cancelled once", async () => {
    fake = useFakeProvider();
    const req = `agent:main:one-handle-race-${tag()}`;
    const s: Surfaces = { mcp: await v1Client(req), a2a: await a2aClient("main"), req };
    const id = (await taskCall(s.mcp, "sessions_spawn", { task: "hold for the race" })).task.taskId;
    await vi.waitFor(() =>
      expect(fake!.pending().some((c: FakeCall) => c.lastUser.includes("hold for the race"))).toBe(true),
    );
    const answers = await Promise.allSettled(
      (["a2a", "mcp", "rest", "tools"] as const).map((how) => abortVia(s, how, id)),
    );
    // Every surface answered (a success, or the no-op answer of an already ended run), none failed otherwise.
    for (const [i, how] of (["a2a", "mcp", "rest", "tools"] as const).entries()) {
      const a = answers[i];
      const said =
        a.status === "fulfilled" ? (typeof a.value === "string" ? a.value : JSON.stringify(a.value)) : String(a.reason);
      const first = {
        a2a: String(TaskState.TASK_STATE_CANCELED),
        mcp: "cancelled",
        rest: "200 aborted",
        tools: '"status":"cancelled"',
      }[how];
      expect(said.includes(first) || SECOND_ABORT[how].test(said), `${how}: ${said}`).toBe(true);
    }
    const run = (await call("GET", `/v1/runs/${id}`)).json;
    expect(run.status).toBe("aborted");
    expect(await runEndEvents(run.sessionKey, id)).toEqual(["aborted"]);
    expect((await call("GET", `/v1/tasks/${run.taskId}`)).json).toMatchObject({ status: "cancelled" });
    await s.mcp.close();
  });
});

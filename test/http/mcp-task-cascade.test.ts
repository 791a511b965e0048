import { TaskState } from "@a2a-js/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { a2aClient } from "../helpers/a2a";
import { buildTree, cascadeEnded, drive, expectAllCancelledOnce, treeFakes } from "../helpers/cascade";
import { call } from "../helpers/http";
import { modernClient, modernSpawnTask, taskCall, v1Client } from "../helpers/mcp-client";
import { childState, releaseAndSettleChildren, requesterKey } from "../helpers/subagents";
import { runEndEvents, type Spawned } from "../helpers/tasks";

/**
 * Cancelling a task-augmented sessions_spawn from any surface that holds its id (src/tasks/run-abort.ts): the
 * child's run is the MCP task, and its end goes through the requester's ledger, so a three-level tree
 * (P → C1, C2 → G1, G2) ends whole — every run aborted, every task `cancelled` once, every parent told once,
 * no model step — whether MCP `tasks/cancel` (both flavours), `POST /v1/runs/{id}/abort` or A2A `CancelTask`
 * asked. A second cancel is a no-op answer and records no second end.
 */

afterEach(releaseAndSettleChildren);

/** P as the MCP task of `start`: its run id is the task id; the run names its ledger task. */
async function spawnedBy(start: () => Promise<string>): Promise<Spawned> {
  const runId = await start();
  const run = (await call("GET", `/v1/runs/${runId}`)).json;
  expect(run).toMatchObject({ runId, kind: "subagent_task" });
  expect(run.taskId).toBe((await childState(run.sessionKey)).meta.subagent.taskId);
  return { childSessionKey: run.sessionKey, runId, taskId: run.taskId };
}

type Surface = "mcp-2025" | "mcp-2026" | "rest" | "a2a";

/** Cancel P's run through one surface; answers what a second cancel there said. */
async function cancelVia(surface: Surface, req: string, runId: string): Promise<string> {
  switch (surface) {
    case "mcp-2025": {
      const client = await v1Client(req);
      expect(await client.experimental.tasks.cancelTask(runId)).toMatchObject({ taskId: runId, status: "cancelled" });
      const again = await client.experimental.tasks.cancelTask(runId).then(String, (e: unknown) => String(e));
      await client.close();
      return again;
    }
    case "mcp-2026": {
      const m = await modernClient(req);
      const ack = z.looseObject({});
      await m.client.request({ method: "tasks/cancel", params: { taskId: runId } }, ack);
      const again = await m.client.request({ method: "tasks/cancel", params: { taskId: runId } }, ack);
      await m.client.close();
      return JSON.stringify(Object.keys(again).filter((k) => k !== "_meta"));
    }
    case "rest": {
      const first = await call("POST", `/v1/runs/${runId}/abort`);
      expect(first.json).toMatchObject({ runId, status: "aborted" });
      const again = await call("POST", `/v1/runs/${runId}/abort`);
      // Answered unchanged: the same end, not a second one.
      expect(again.json).toEqual(first.json);
      return `${again.status} ${again.json.status}`;
    }
    case "a2a": {
      const client = await a2aClient("main");
      const task = await client.cancelTask({ tenant: "", id: runId, metadata: undefined });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      return client.cancelTask({ tenant: "", id: runId, metadata: undefined }).then(String, (e: unknown) => String(e));
    }
  }
}

const SECOND: Record<Surface, RegExp> = {
  "mcp-2025": /Cannot cancel task: already in terminal status cancelled/,
  "mcp-2026": /^\[\]$/,
  rest: /^200 aborted$/,
  a2a: /already ended \(aborted\)/,
};

describe("cancelling a task-augmented sessions_spawn ends its whole tree, from every surface", () => {
  for (const surface of ["mcp-2025", "mcp-2026", "rest", "a2a"] as const)
    it(`${surface}: every descendant's run aborted and task cancelled once, each parent told once`, async () => {
      const fake = treeFakes();
      const req = requesterKey(`mcp-cascade-${surface}`);
      const start =
        surface === "mcp-2026"
          ? async () => modernSpawnTask(await modernClient(req), { task: "orchestrate P" })
          : async () => {
              const client = await v1Client(req);
              const { task } = await taskCall(client, "sessions_spawn", { task: "orchestrate P" });
              await client.close();
              return task.taskId;
            };
      const { p, tree } = await buildTree(req, () => spawnedBy(start));
      const stepsBefore = fake.model.length;

      expect(await cancelVia(surface, req, p.runId)).toMatch(SECOND[surface]);

      await drive(() => [req, ...tree], cascadeEnded(req, tree));
      await expectAllCancelledOnce(req, tree);
      expect(fake.model.slice(stepsBefore)).toEqual([]);
      // The ledger says so over REST too, and P's run ended once: one end event, however often it was cancelled.
      expect((await call("GET", `/v1/tasks/${p.taskId}`)).json).toMatchObject({ status: "cancelled" });
      expect(await runEndEvents(p.childSessionKey, p.runId)).toEqual(["aborted"]);
    });
});

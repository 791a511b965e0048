import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { setConfigOverride } from "../../src/config/load";
import { MCP_TASK_PAGE } from "../../src/http/mcp-task-list";
import { callExtension } from "../../src/session/extensions";
import { newRunId } from "../../src/session/run-id";
import { RESEARCH_TOKEN, sessionStub } from "../helpers/http";
import { modernClient, taskCall, v1Client } from "../helpers/mcp-client";
import { installFakes, releaseAndSettleChildren, requesterKey, subagentConfig } from "../helpers/subagents";

/**
 * MCP `tasks/list` (src/http/mcp-task-list.ts; docs/protocols.md, "MCP tasks"): the caller's tasks are its
 * requester session's ledger tasks that have a run, newest first, a bounded page at a time behind an opaque
 * cursor, each with the run id as its task id — the id tasks/get, tasks/cancel and REST take.
 */

afterEach(releaseAndSettleChildren);

describe("MCP tasks/list", () => {
  it("2025-11-25: the requester's tasks, newest first, paged by an opaque cursor; another requester sees none of them", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "hang" : "noted"));
    const req = requesterKey("mcp-task-list");
    const client = await v1Client(req);
    const { task } = await taskCall(client, "sessions_spawn", { task: "listed work" });
    // One more page than a page holds: tasks of another runtime recorded after the spawn, each with a run.
    const seeded: string[] = [];
    for (let i = 0; i < MCP_TASK_PAGE; i++) {
      const runId = newRunId("agent:main:mcp-task-list-target");
      await callExtension(sessionStub(req), "task-ledger", "record", { runtime: "send", task: `seed ${i}`, runId });
      seeded.push(runId);
    }
    // A task the ledger holds without a run has no MCP handle: it is not listed.
    await callExtension(sessionStub(req), "task-ledger", "record", { runtime: "yield", task: "no run" });

    const first = await client.experimental.tasks.listTasks();
    expect(first.tasks.map((t) => t.taskId)).toEqual([...seeded].reverse());
    expect(first.tasks[0]).toEqual({
      taskId: seeded.at(-1),
      status: "working",
      statusMessage: "Task queued",
      createdAt: expect.any(String),
      lastUpdatedAt: expect.any(String),
      ttl: null,
      pollInterval: 2000,
    });
    expect(typeof first.nextCursor).toBe("string");
    const second = await client.experimental.tasks.listTasks(first.nextCursor);
    expect(second.tasks.map((t) => t.taskId)).toEqual([task.taskId]);
    expect(second.nextCursor).toBeUndefined();
    // The spawn's entry agrees with tasks/get, which reads the run; a cancel shows in both.
    expect(second.tasks[0].status).toBe((await client.experimental.tasks.getTask(task.taskId)).status);
    await client.experimental.tasks.cancelTask(task.taskId);
    const after = await client.experimental.tasks.listTasks(first.nextCursor);
    expect(after.tasks[0]).toMatchObject({ taskId: task.taskId, status: "cancelled" });
    expect(after.tasks[0].statusMessage).toMatch(/^Task cancelled: /);
    // The cursor still points where it did while tasks change: the same page.
    expect(after.tasks.map((t) => t.taskId)).toEqual([task.taskId]);

    // Not a cursor we gave out: -32602.
    for (const bad of ["not a cursor", "dGwxOjA", "x".repeat(100)])
      await expect(client.experimental.tasks.listTasks(bad)).rejects.toThrow(/Invalid cursor/);
    await client.close();

    // An agent token lists within its own agent's sessions only: naming another agent's session is refused before
    // any MCP method is answered (the error envelope: forbidden).
    await expect(v1Client(req, RESEARCH_TOKEN)).rejects.toThrow(
      /"forbidden".*The token of agent .*research.* cannot act on session/,
    );
    // Another requester's list holds none of these.
    const other = await v1Client(requesterKey("mcp-task-list-other"));
    expect(await other.experimental.tasks.listTasks()).toEqual({ tasks: [] });
    await other.close();
  });

  it("2026-07-28: the tasks extension has no tasks/list, so the method is not served there", async () => {
    const m = await modernClient(requesterKey("mcp-task-list-2026"));
    // The SDK's v2 client will not even send it on this revision; sent as that client sends tasks/get, it is refused.
    expect(() => m.client.request({ method: "tasks/list", params: {} }, z.looseObject({}))).toThrow(
      /Method 'tasks\/list' is not supported by the negotiated protocol version/,
    );
    await m.client
      .request({ method: "tasks/get", params: { taskId: "not-a-run" } }, z.looseObject({}))
      .catch(() => undefined);
    const asGet = m.sent.at(-1)!;
    const body = (await asGet.clone().json()) as { method: string; params: Record<string, unknown> };
    expect(body.method).toBe("tasks/get");
    const headers = new Headers(asGet.headers);
    headers.set("Mcp-Method", "tasks/list");
    // The task-id routing header of tasks/get has no place on a list.
    for (const [name] of [...headers])
      if (name.startsWith("mcp-") && name !== "mcp-method" && name !== "mcp-protocol-version") headers.delete(name);
    const res = await exports.default.fetch(asGet.url, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...body, method: "tasks/list", params: { _meta: body.params._meta } }),
    });
    const answer = (await res.json()) as { error?: { code: number; message: string } };
    expect(answer.error).toEqual({ code: -32601, message: "Method not found" });
    await m.client.close();
  });
});

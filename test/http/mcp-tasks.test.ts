import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { setConfigOverride } from "../../src/config/load";
import { TASKS_EXTENSION } from "../../src/http/mcp-tasks";
import { TOOLS } from "../../src/tools/registry";
import { type FakeCall, useFakeProvider } from "../helpers/fake-provider";
import { call, MAIN_TOKEN, sessionStub } from "../helpers/http";
import { modernClient, taskCall, v1Client } from "../helpers/mcp-client";
import { answerAllAndQuiesce } from "../helpers/quiesce";
import { evict } from "../helpers/restart";
import { installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/**
 * MCP tasks (docs/protocols.md, "MCP tasks"), driven with the SDK's v1 client, which speaks protocol
 * 2025-11-25's tasks (the v2 SDK parses task vocabulary but has no task runtime). The task id is the run id:
 * the same id answers GET /v1/runs/{id}.
 */

const visibleSiblings = { tools: { sessions: { visibility: "agent" } } };
let fake: ReturnType<typeof useFakeProvider> | undefined;

afterEach(async () => {
  if (fake) await answerAllAndQuiesce(fake);
  fake = undefined;
});

const tag = () => crypto.randomUUID().slice(0, 8);

describe("MCP tasks, protocol 2025-11-25 (the SDK's v1 client)", () => {
  it("advertises the tasks capability, and task support only on the tools that start runs", async () => {
    const client = await v1Client(`agent:main:mcp-tasks-list-${tag()}`);
    expect(client.getServerCapabilities()?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
    // Every tool is listed; only the two that start a run of their own support tasks.
    expect(support).toEqual(
      Object.fromEntries(
        TOOLS.map((t) => [t.name, t.name === "sessions_send" || t.name === "sessions_spawn" ? "optional" : null]),
      ),
    );
    await client.close();
  });

  it("a task-augmented sessions_spawn: the child's run is the task, polled with tasks/get, its result read after an eviction", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "one two three" : "noted"));
    const requester = requesterKey("mcp-task-spawn");
    const client = await v1Client(requester);
    const { task } = await taskCall(client, "sessions_spawn", { task: "count to three" });
    // Answered once the child's run row is committed: the task is that run as it is then (the fake model
    // answers at once, so it may have ended already).
    expect(task).toMatchObject({ ttl: null, pollInterval: 2000 });
    expect(["working", "completed"]).toContain(task.status);
    // The task id is the child's run id: REST reads the same run.
    const rest = await call("GET", `/v1/runs/${task.taskId}`);
    expect(rest.status).toBe(200);
    expect(rest.json).toMatchObject({ runId: task.taskId, kind: "subagent_task" });
    const childKey = rest.json.sessionKey as string;
    expect(childKey).toMatch(/^agent:main:subagent:/);
    await vi.waitFor(async () =>
      expect(await client.experimental.tasks.getTask(task.taskId)).toMatchObject({
        taskId: task.taskId,
        status: "completed",
      }),
    );
    // Nothing of the task is memory: with both objects evicted, tasks/get and tasks/result answer from SQLite.
    await settle(childKey);
    await evict(sessionStub(childKey), sessionStub(requester));
    expect(await client.experimental.tasks.getTask(task.taskId)).toMatchObject({
      taskId: task.taskId,
      status: "completed",
      statusMessage: "Run ok",
    });
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toMatchObject({
      runId: task.taskId,
      sessionKey: childKey,
      status: "ok",
      kind: "subagent_task",
      reply: "one two three",
    });
    expect(result._meta).toEqual({ "io.modelcontextprotocol/related-task": { taskId: task.taskId } });
    await client.close();
  });

  it("a task-augmented waiting sessions_send: the target's run is the task, and its result is fetched", async () => {
    fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = `agent:main:mcp-tasks-send-${tag()}`;
    const target = `agent:main:mcp-tasks-send-target-${tag()}`;
    const client = await v1Client(requester);
    const { task } = await taskCall(client, "sessions_send", {
      sessionKey: target,
      message: "ping",
      timeoutSeconds: 30,
    });
    // It answered at once (the wait is the task's now), with the target's run.
    const rest = await call("GET", `/v1/runs/${task.taskId}`);
    expect(rest.json).toMatchObject({ runId: task.taskId, sessionKey: target, kind: "send" });
    const ping = () => fake!.pending().find((c: FakeCall) => c.lastUser.includes("ping"));
    await vi.waitFor(() => expect(ping()).toBeDefined());
    // The call answered before the reply: the wait is the task's now.
    expect(task.status).toBe("working");
    ping()!.reply("pong");
    await vi.waitFor(async () =>
      expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("completed"),
    );
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(result.structuredContent).toMatchObject({ runId: task.taskId, status: "ok", reply: "pong" });
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(result.structuredContent);
    await client.close();
  });

  it("tasks/cancel aborts the run: the task is cancelled and REST shows the run aborted (one handle)", async () => {
    fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = `agent:main:mcp-tasks-cancel-${tag()}`;
    const client = await v1Client(requester);
    const { task } = await taskCall(client, "sessions_spawn", { task: "never finishes" });
    await vi.waitFor(() =>
      expect(fake!.pending().some((c: FakeCall) => c.lastUser.includes("never finishes"))).toBe(true),
    );
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: "cancelled" });
    const rest = await call("GET", `/v1/runs/${task.taskId}`);
    expect(rest.json).toMatchObject({ runId: task.taskId, status: "aborted" });
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("cancelled");
    // A finished task cannot be cancelled again (2025-11-25: an error for a terminal task).
    await expect(client.experimental.tasks.cancelTask(task.taskId)).rejects.toThrow(
      /Cannot cancel task: already in terminal status cancelled/,
    );
    // And a run aborted through REST is a cancelled task too.
    const second = (await taskCall(client, "sessions_spawn", { task: "aborted over REST" })).task;
    expect((await call("POST", `/v1/runs/${second.taskId}/abort`)).json.status).toBe("aborted");
    expect((await client.experimental.tasks.getTask(second.taskId)).status).toBe("cancelled");
    await client.close();
  });

  it("refuses tasks of another agent's sessions, and ids that name no run", async () => {
    fake = useFakeProvider({ extraConfig: visibleSiblings });
    const operator = await v1Client(`agent:research:mcp-tasks-foreign-${tag()}`);
    const { task } = await taskCall(operator, "sessions_spawn", { task: "research work" });
    await operator.close();
    const main = await v1Client(`agent:main:mcp-tasks-other-${tag()}`, MAIN_TOKEN);
    for (const ask of [
      () => main.experimental.tasks.getTask(task.taskId),
      () => main.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema),
      () => main.experimental.tasks.cancelTask(task.taskId),
    ])
      await expect(ask()).rejects.toThrow(/The token of agent "main" cannot act on session agent:research:subagent:/);
    // Still running: the refused cancel did nothing.
    expect((await call("GET", `/v1/runs/${task.taskId}`)).json.status).not.toBe("aborted");
    await expect(main.experimental.tasks.getTask("not-a-run")).rejects.toThrow(
      /Failed to retrieve task: Task not found: not-a-run/,
    );
    await main.close();
    await call("POST", `/v1/runs/${task.taskId}/abort`);
  });
});

describe("MCP tasks, revision 2026-07-28's tasks extension (the SDK's v2 client)", () => {
  const taskSchema = z.looseObject({ taskId: z.string(), status: z.string() });
  /** The fields of an acknowledgement besides the SDK's own `_meta` (its server identity). */
  const ack = (r: Record<string, unknown>) => Object.keys(r).filter((k) => k !== "_meta");

  it("server/discover advertises the extension; a waiting sessions_send answers resultType task; tasks/get carries the result; tasks/cancel acknowledges", async () => {
    fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = `agent:main:mcp-tasks-2026-${tag()}`;
    const target = `agent:main:mcp-tasks-2026-target-${tag()}`;
    const { client, seen } = await modernClient(requester);
    expect(client.getServerCapabilities()?.extensions).toEqual({ [TASKS_EXTENSION]: {} });
    // The SDK's v2 client has no task runtime: it refuses the answer, which is on the wire as the extension says.
    await expect(
      client.callTool({
        name: "sessions_send",
        arguments: { sessionKey: target, message: "ping", timeoutSeconds: 30 },
      }),
    ).rejects.toThrow(/Unsupported result type 'task'/);
    const created = (seen.at(-1) as { result: Record<string, unknown> }).result;
    expect(created).toMatchObject({ resultType: "task", status: "working", ttlMs: null, pollIntervalMs: 2000 });
    const taskId = created.taskId as string;
    expect((await call("GET", `/v1/runs/${taskId}`)).json).toMatchObject({ runId: taskId, sessionKey: target });
    const ping = () => fake!.pending().find((c: FakeCall) => c.lastUser.includes("ping"));
    await vi.waitFor(() => expect(ping()).toBeDefined());
    expect(await client.request({ method: "tasks/get", params: { taskId } }, taskSchema)).toMatchObject({
      taskId,
      status: "working",
    });
    ping()!.reply("pong");
    await vi.waitFor(async () =>
      expect((await client.request({ method: "tasks/get", params: { taskId } }, taskSchema)).status).toBe("completed"),
    );
    const done = (seen.at(-1) as { result: Record<string, any> }).result;
    expect(done).toMatchObject({ resultType: "complete", taskId, status: "completed" });
    expect(done.result.structuredContent).toMatchObject({ runId: taskId, status: "ok", reply: "pong" });
    // Cancelling a finished task is acknowledged and changes nothing.
    expect(ack(await client.request({ method: "tasks/cancel", params: { taskId } }, z.looseObject({})))).toEqual([]);
    expect((await call("GET", `/v1/runs/${taskId}`)).json.status).toBe("ok");
    await client.close();
  });

  it("tasks/cancel ends a spawned child's run; a client that did not declare the extension gets plain results and -32021", async () => {
    fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = `agent:main:mcp-tasks-2026-cancel-${tag()}`;
    const { client, seen } = await modernClient(requester);
    await expect(client.callTool({ name: "sessions_spawn", arguments: { task: "long job" } })).rejects.toThrow(
      /Unsupported result type 'task'/,
    );
    const taskId = (seen.at(-1) as { result: { taskId: string } }).result.taskId;
    expect(ack(await client.request({ method: "tasks/cancel", params: { taskId } }, z.looseObject({})))).toEqual([]);
    expect((await call("GET", `/v1/runs/${taskId}`)).json.status).toBe("aborted");
    expect((await client.request({ method: "tasks/get", params: { taskId } }, taskSchema)).status).toBe("cancelled");
    await client.close();

    // A call that starts no run is no task, even from a declaring client: its plain tool result.
    const again = await modernClient(requester);
    const refused = await again.client.callTool({
      name: "sessions_send",
      arguments: { sessionKey: "agent:research:elsewhere", message: "hi", timeoutSeconds: 30 },
    });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ status: "forbidden" });
    await again.client.close();

    const plain = await modernClient(requester, false);
    const spawned = await plain.client.callTool({ name: "sessions_spawn", arguments: { task: "plain job" } });
    expect(spawned.structuredContent).toMatchObject({ status: "accepted" });
    await expect(plain.client.request({ method: "tasks/get", params: { taskId } }, taskSchema)).rejects.toThrow(
      /Missing required client capability/,
    );
    await call("POST", `/v1/runs/${(spawned.structuredContent as { runId: string }).runId}/abort`);
    await plain.client.close();
  });
});

import { runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { TaskState } from "@a2a-js/sdk";
import { describe, expect, it, vi } from "vitest";
import type { SessionObject } from "../../src/session/session-object";
import { a2aClient, ORIGIN, shape, textMessage } from "../helpers/a2a";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, GATEWAY, RESEARCH_TOKEN, sessionStub } from "../helpers/http";
import { SseReader } from "../helpers/sse";

const { COMPLETED, WORKING, SUBMITTED, CANCELED } = {
  COMPLETED: TaskState.TASK_STATE_COMPLETED,
  WORKING: TaskState.TASK_STATE_WORKING,
  SUBMITTED: TaskState.TASK_STATE_SUBMITTED,
  CANCELED: TaskState.TASK_STATE_CANCELED,
};

const replyOf = (task: { artifacts: { parts: { content?: { value: unknown } }[] }[] }) =>
  task.artifacts.map((a) => a.parts.map((p) => p.content?.value).join("")).join("");

/** One HTTP+JSON request as any client would send it. */
function rest(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  return exports.default.fetch(`${ORIGIN}/a2a/main${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${GATEWAY}`,
      "A2A-Version": "1.0",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe("A2A HTTP+JSON binding (the official A2A JS SDK's REST transport)", () => {
  it("the card lists it; SendMessage, GetTask and streaming answer as over JSON-RPC — the task is the run", async () => {
    const client = await a2aClient("main", GATEWAY, "rest");
    const task = await client.sendMessage(textMessage("hello over rest"));
    if (!("id" in task)) throw new Error("expected a task");
    expect([task.status?.state, replyOf(task)]).toEqual([COMPLETED, "hello over rest"]);
    expect((await call("GET", `/v1/runs/${task.id}`)).json).toMatchObject({ runId: task.id, status: "ok" });
    expect((await client.getTask({ tenant: "", id: task.id })).status?.state).toBe(COMPLETED);
    const events = [];
    for await (const e of client.sendMessageStream(textMessage("streamed over rest", { contextId: task.contextId })))
      events.push(shape(e));
    expect(events[0]).toEqual(["task", SUBMITTED]);
    expect(events.slice(-2)).toEqual([
      ["artifact", { text: "streamed over rest", append: false, last: true }],
      ["status", COMPLETED],
    ]);
  });

  it("CancelTask aborts the run (REST sees it aborted); a second cancel is refused", async () => {
    const fake = useFakeProvider();
    const client = await a2aClient("main", GATEWAY, "rest");
    const held = await client.sendMessage(textMessage("hold", { returnImmediately: true }));
    if (!("id" in held)) throw new Error("expected a task");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect((await client.cancelTask({ tenant: "", id: held.id, metadata: undefined })).status?.state).toBe(CANCELED);
    expect((await call("GET", `/v1/runs/${held.id}`)).json.status).toBe("aborted");
    await expect(client.cancelTask({ tenant: "", id: held.id, metadata: undefined })).rejects.toThrow(/already ended/);
  });

  it("a stream dropped mid-run is resumed with SubscribeToTask and ends with the whole reply", async () => {
    const fake = useFakeProvider();
    const client = await a2aClient("main", GATEWAY, "rest");
    const first = client.sendMessageStream(textMessage("hold"));
    const opened = await first.next();
    const taskId = opened.value!.payload!.$case === "task" ? opened.value!.payload!.value.id : "";
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await first.return(undefined); // the connection drops
    const resumed = client.resubscribeTask({ tenant: "", id: taskId });
    expect(shape((await resumed.next()).value!)).toEqual(["task", WORKING]);
    fake.pending()[0].reply("held, then resumed");
    const rest = [];
    for await (const e of resumed) rest.push(shape(e));
    expect(rest.slice(-2)).toEqual([
      ["artifact", { text: "held, then resumed", append: false, last: true }],
      ["status", COMPLETED],
    ]);
  });

  it("push configs over the binding: create (201), list, get, delete (204)", async () => {
    const fake = useFakeProvider();
    const client = await a2aClient("main", GATEWAY, "rest");
    const held = await client.sendMessage(textMessage("hold", { returnImmediately: true }));
    if (!("id" in held)) throw new Error("expected a task");
    const created = await rest("POST", `/tasks/${held.id}/pushNotificationConfigs`, {
      id: "rest-hook",
      url: "https://receiver.test/rest",
      token: "rest-token",
    });
    expect(created.status).toBe(201);
    expect(await created.json()).toEqual({
      id: "rest-hook",
      taskId: held.id,
      url: "https://receiver.test/rest",
      token: "rest-token",
    });
    const listed = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: held.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(listed.configs.map((c) => [c.id, c.url])).toEqual([["rest-hook", "https://receiver.test/rest"]]);
    const got = await client.getTaskPushNotificationConfig({ tenant: "", taskId: held.id, id: "rest-hook" });
    expect(got.token).toBe("rest-token");
    const deleted = await rest("DELETE", `/tasks/${held.id}/pushNotificationConfigs/rest-hook`);
    expect([deleted.status, await deleted.text()]).toEqual([204, ""]);
    await expect(
      client.getTaskPushNotificationConfig({ tenant: "", taskId: held.id, id: "rest-hook" }),
    ).rejects.toThrow(/not found/);
    // Nothing was configured when the run ends: no notification (the receiver URL is never fetched).
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("done");
  });

  it("exact shapes: media types, the SDK's REST error body, our envelope for access, SSE ids and Last-Event-ID", async () => {
    const sent = await rest("POST", "/message:send", {
      message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "exact" }] },
    });
    expect([sent.status, sent.headers.get("content-type")]).toEqual([200, "application/a2a+json"]);
    const task = ((await sent.json()) as any).task;
    expect(task).toMatchObject({
      id: expect.any(String),
      contextId: expect.stringMatching(/^a2a:/),
      status: { state: "TASK_STATE_COMPLETED" },
      artifacts: [{ artifactId: "reply", parts: [{ text: "exact" }] }],
    });
    const got = await rest("GET", `/tasks/${task.id}`);
    expect(((await got.json()) as any).status.state).toBe("TASK_STATE_COMPLETED");

    const missing = await rest("GET", "/tasks/no-such-task");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: {
        code: 404,
        status: "NOT_FOUND",
        message: "Task not found: no-such-task",
        details: [expect.objectContaining({ reason: "TASK_NOT_FOUND" })],
      },
    });
    const ended = await rest("POST", `/tasks/${task.id}:cancel`);
    expect([ended.status, ((await ended.json()) as any).error.status]).toEqual([400, "FAILED_PRECONDITION"]);
    const noVersion = await rest("GET", `/tasks/${task.id}`, undefined, { "A2A-Version": "" });
    expect([noVersion.status, ((await noVersion.json()) as any).error.details[0].reason]).toEqual([
      400,
      "VERSION_NOT_SUPPORTED",
    ]);
    const badType = await rest("POST", "/message:send", undefined, { "Content-Type": "text/plain" });
    expect(((await badType.json()) as any).error.details[0].reason).toBe("CONTENT_TYPE_NOT_SUPPORTED");
    const notJson = await exports.default.fetch(`${ORIGIN}/a2a/main/message:send`, {
      method: "POST",
      headers: { Authorization: `Bearer ${GATEWAY}`, "A2A-Version": "1.0", "Content-Type": "application/json" },
      body: "{not json",
    });
    expect([notJson.status, ((await notJson.json()) as any).error.message]).toEqual([400, "Invalid JSON payload."]);
    // Access is the envelope, as on the JSON-RPC endpoint.
    const other = await rest("GET", `/tasks/${task.id}`, undefined, { Authorization: `Bearer ${RESEARCH_TOKEN}` });
    expect([other.status, ((await other.json()) as any).error.message]).toEqual([
      403,
      'The token of agent "research" cannot act as agent "main"',
    ]);
    expect((await rest("GET", `/tasks/${task.id}:cancel`)).status).toBe(404);
    expect(
      (await exports.default.fetch(`${ORIGIN}/a2a/nobody/tasks/x`, { headers: { Authorization: `Bearer ${GATEWAY}` } }))
        .status,
    ).toBe(404);
  });

  it("a stream's SSE ids are resume points: SubscribeToTask with Last-Event-ID continues after it, without repeats", async () => {
    const fake = useFakeProvider();
    const res = await rest("POST", "/message:stream", {
      message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "hold" }] },
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const sse = new SseReader(res.body!.getReader());
    const task = JSON.parse((await sse.next())!.data).task;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const generate = (text: string) =>
      runInDurableObject(sessionStub(`agent:main:${task.contextId}`), (obj: SessionObject) =>
        obj.events.runs.delta(task.id, text),
      );
    const update = (e: { id?: string; data: string }) => {
      const r = JSON.parse(e.data);
      return r.artifactUpdate
        ? { id: e.id, text: r.artifactUpdate.artifact.parts[0].text, append: r.artifactUpdate.append ?? false }
        : { id: e.id, state: r.statusUpdate.status.state };
    };
    await generate("Hel");
    const seen = (await sse.takeN(2)).map(update);
    const incarnation = seen[1].id!.split(":")[0];
    expect(seen).toEqual([
      { id: undefined, state: "TASK_STATE_WORKING" },
      { id: `${incarnation}:1`, text: "Hel", append: false },
    ]);
    await sse.cancel(); // the connection drops
    await generate("lo"); // generated while nobody watched
    expect(
      (await rest("POST", `/tasks/${task.id}:subscribe`, undefined, { "Last-Event-ID": "not an id" })).status,
    ).toBe(400);
    const resumed = await rest("POST", `/tasks/${task.id}:subscribe`, undefined, { "Last-Event-ID": seen[1].id! });
    const again = new SseReader(resumed.body!.getReader());
    expect(JSON.parse((await again.next())!.data).task.status.state).toBe("TASK_STATE_WORKING");
    expect(update((await again.next())!)).toEqual({ id: `${incarnation}:2`, text: "lo", append: true });
    fake.pending()[0].reply("Hello");
    const end = (await again.rest()).map(update);
    expect(end.slice(-2)).toEqual([
      { id: undefined, text: "Hello", append: false },
      { id: expect.stringMatching(new RegExp(`^${incarnation}:\\d+$`)), state: "TASK_STATE_COMPLETED" },
    ]);
    // An ended task has no stream: GetTask answers it.
    const ended = await rest("POST", `/tasks/${task.id}:subscribe`);
    expect([ended.status, ((await ended.json()) as any).error.message]).toEqual([
      400,
      expect.stringMatching(/already ended \(ok\): use GetTask$/),
    ]);
  });
});

import { runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { TaskState } from "@a2a-js/sdk";
import { describe, expect, it, vi } from "vitest";
import { A2A_MAX_CONTEXT_ID } from "../../src/a2a/handler";
import { mintRunToken } from "../../src/runners/run-token";
import type { SessionObject } from "../../src/session/session-object";
import { a2aClient, ORIGIN, shape, textMessage } from "../helpers/a2a";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, GATEWAY, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sessionStub } from "../helpers/http";
import { SseReader } from "../helpers/sse";

const { COMPLETED, WORKING, SUBMITTED, CANCELED } = {
  COMPLETED: TaskState.TASK_STATE_COMPLETED,
  WORKING: TaskState.TASK_STATE_WORKING,
  SUBMITTED: TaskState.TASK_STATE_SUBMITTED,
  CANCELED: TaskState.TASK_STATE_CANCELED,
};

const replyOf = (task: { artifacts: { parts: { content?: { $case: string; value: unknown } }[] }[] }) =>
  task.artifacts.map((a) => a.parts.map((p) => p.content?.value).join("")).join("");

describe("A2A: every agent an A2A agent (official A2A JS client)", () => {
  it("serves each agent's card, public and without secrets; the site's card is the default agent's", async () => {
    const r = await call("GET", "/a2a/research/.well-known/agent-card.json", undefined, { token: null });
    expect(r.status).toBe(200);
    expect(r.json.supportedInterfaces).toEqual([
      { url: `${ORIGIN}/a2a/research`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: `${ORIGIN}/a2a/research`, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
    ]);
    expect(r.json.capabilities).toEqual({ streaming: true, pushNotifications: true, extendedAgentCard: false });
    expect(Object.keys(r.json.securitySchemes)).toEqual(["gatewayToken", "agentToken"]);
    expect(r.json.skills.map((s: { id: string }) => s.id)).toEqual(["converse"]);
    const text = JSON.stringify(r.json);
    for (const secret of [GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN]) expect(text).not.toContain(secret);
    const site = await call("GET", "/.well-known/agent-card.json", undefined, { token: null });
    expect(site.json.supportedInterfaces[0].url).toBe(`${ORIGIN}/a2a/main`);
    expect((await call("GET", "/a2a/nobody/.well-known/agent-card.json", undefined, { token: null })).status).toBe(404);
  });

  it("SendMessage: the task is the run — completed with the echo reply; the same id in GET /v1/runs/{id}; the context is the session", async () => {
    const client = await a2aClient("main");
    const task = await client.sendMessage(textMessage("hello over a2a"));
    if (!("id" in task)) throw new Error("expected a task");
    expect(task.status?.state).toBe(COMPLETED);
    expect(replyOf(task)).toBe("hello over a2a");
    expect(task.contextId).toMatch(/^a2a:[0-9a-f-]{36}$/);
    const rest = await call("GET", `/v1/runs/${task.id}`);
    expect(rest.json).toMatchObject({ runId: task.id, status: "ok", reply: "hello over a2a" });
    expect(rest.json.sessionKey).toBe(`agent:main:${task.contextId}`);
    // A second message in the same context is the next turn of the same session.
    const again = await client.sendMessage(textMessage("second turn", { contextId: task.contextId }));
    if (!("id" in again)) throw new Error("expected a task");
    expect(again.contextId).toBe(task.contextId);
    const history = await call("GET", `/v1/sessions/${encodeURIComponent(rest.json.sessionKey)}/history`);
    expect(history.json.messages.filter((m: { role: string }) => m.role === "user")).toHaveLength(2);
    // GetTask reads it back.
    expect((await client.getTask({ tenant: "", id: task.id })).status?.state).toBe(COMPLETED);
  });

  it("SendStreamingMessage: the task, working, the reply as artifact updates, then completed", async () => {
    const client = await a2aClient("main", MAIN_TOKEN);
    const events = [];
    for await (const e of client.sendMessageStream(textMessage("streamed words arrive in pieces"))) events.push(e);
    const shapes = events.map(shape);
    expect(shapes[0]).toEqual(["task", SUBMITTED]);
    expect(shapes.at(-1)).toEqual(["status", COMPLETED]);
    const last = shapes.at(-2)!;
    expect(last).toEqual(["artifact", { text: "streamed words arrive in pieces", append: false, last: true }]);
  });

  it("CancelTask aborts the run (REST sees it aborted); a second cancel is refused; REST's abort is seen by GetTask", async () => {
    const fake = useFakeProvider();
    const client = await a2aClient("main");
    const held = await client.sendMessage(textMessage("hold", { returnImmediately: true }));
    if (!("id" in held)) throw new Error("expected a task");
    expect([SUBMITTED, WORKING]).toContain(held.status?.state);
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const canceled = await client.cancelTask({ tenant: "", id: held.id, metadata: undefined });
    expect(canceled.status?.state).toBe(CANCELED);
    expect((await call("GET", `/v1/runs/${held.id}`)).json.status).toBe("aborted");
    await expect(client.cancelTask({ tenant: "", id: held.id, metadata: undefined })).rejects.toThrow(/already ended/);

    const other = await client.sendMessage(textMessage("hold again", { returnImmediately: true }));
    if (!("id" in other)) throw new Error("expected a task");
    expect((await call("POST", `/v1/runs/${other.id}/abort`)).json.status).toBe("aborted");
    expect((await client.getTask({ tenant: "", id: other.id })).status?.state).toBe(CANCELED);
  });

  it("a stream dropped mid-run is resumed with SubscribeToTask and ends with the whole reply", async () => {
    const fake = useFakeProvider();
    const client = await a2aClient("main");
    const first = client.sendMessageStream(textMessage("hold"));
    const opened = await first.next();
    const taskId = opened.value!.payload!.$case === "task" ? opened.value!.payload!.value.id : "";
    expect(taskId).not.toBe("");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await first.return(undefined); // the connection drops
    const resumed = client.resubscribeTask({ tenant: "", id: taskId });
    const snapshot = await resumed.next();
    expect(shape(snapshot.value!)).toEqual(["task", WORKING]);
    fake.pending()[0].reply("the held reply");
    const rest = [];
    for await (const e of resumed) rest.push(shape(e));
    expect(rest.at(-2)).toEqual(["artifact", { text: "the held reply", append: false, last: true }]);
    expect(rest.at(-1)).toEqual(["status", COMPLETED]);
    // An ended task has no stream to join: GetTask answers it.
    await expect(client.resubscribeTask({ tenant: "", id: taskId }).next()).rejects.toThrow(/already ended/);
  });

  it("SSE ids are the run stream's event ids: SubscribeToTask with Last-Event-ID continues after it, without repeats", async () => {
    const fake = useFakeProvider();
    const rpc = (method: string, params: unknown, headers: Record<string, string> = {}) =>
      exports.default.fetch(`${ORIGIN}/a2a/main`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${GATEWAY}`,
          "A2A-Version": "1.0",
          "Content-Type": "application/json",
          ...headers,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method, params }),
      });
    const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "hold" }] };
    const res = await rpc("SendStreamingMessage", { message });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const sse = new SseReader(res.body!.getReader());
    const task = JSON.parse((await sse.next())!.data).result.task;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const generate = (text: string) =>
      runInDurableObject(sessionStub(`agent:main:${task.contextId}`), (obj: SessionObject) =>
        obj.events.runs.delta(task.id, text),
      );
    const update = (e: { id?: string; data: string }) => {
      const r = JSON.parse(e.data).result;
      return r.artifactUpdate
        ? { id: e.id, text: r.artifactUpdate.artifact.parts[0].text, append: r.artifactUpdate.append ?? false }
        : { id: e.id, state: r.statusUpdate.status.state };
    };
    await generate("Hel");
    await generate("lo");
    const seen = (await sse.takeN(3)).map(update);
    const incarnation = seen[1].id!.split(":")[0];
    expect(seen).toEqual([
      { id: undefined, state: "TASK_STATE_WORKING" },
      { id: `${incarnation}:1`, text: "Hel", append: false },
      { id: `${incarnation}:2`, text: "lo", append: true },
    ]);
    await sse.cancel(); // the connection drops
    await generate(" world"); // generated while nobody watched
    const again = new SseReader(
      (await rpc("SubscribeToTask", { id: task.id }, { "Last-Event-ID": seen[2].id! })).body!.getReader(),
    );
    expect(JSON.parse((await again.next())!.data).result.task.status.state).toBe("TASK_STATE_WORKING");
    expect(update((await again.next())!)).toEqual({ id: `${incarnation}:3`, text: " world", append: true });
    fake.pending()[0].reply("Hello world");
    const end = (await again.rest()).map(update);
    expect(end.slice(-2)).toEqual([
      { id: undefined, text: "Hello world", append: false },
      { id: expect.stringMatching(new RegExp(`^${incarnation}:\\d+$`)), state: "TASK_STATE_COMPLETED" },
    ]);
  });

  it("one handle: a sessions_send run from /tools/invoke is a task of its target agent; cancelled over A2A, the tool's run is aborted", async () => {
    // Main's main session sends into a session of agent research (visibility "all", agent-to-agent on).
    const fake = useFakeProvider({
      extraConfig: { tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } } },
    });
    const sent = await invoke("sessions_send", {
      sessionKey: "agent:research:a2a-handle",
      message: "hold",
      timeoutSeconds: 0,
    });
    expect(sent.details).toMatchObject({ status: "accepted" });
    const runId = sent.details.runId as string;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const research = await a2aClient("research", RESEARCH_TOKEN);
    const task = await research.getTask({ tenant: "", id: runId });
    expect([task.id, task.contextId]).toEqual([runId, "a2a-handle"]);
    expect((await research.cancelTask({ tenant: "", id: runId, metadata: undefined })).status?.state).toBe(CANCELED);
    expect((await call("GET", `/v1/runs/${runId}`)).json.status).toBe("aborted");
  });

  it("auth: another agent's token is refused; a task of another agent is not found under this one", async () => {
    const r = await call(
      "POST",
      "/a2a/main",
      { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } },
      { token: RESEARCH_TOKEN, headers: { "A2A-Version": "1.0" } },
    );
    expect(r.status).toBe(403);
    expect(r.json.error.message).toBe('The token of agent "research" cannot act as agent "main"');
    const research = await a2aClient("research", RESEARCH_TOKEN);
    const task = await research.sendMessage(textMessage("mine"));
    if (!("id" in task)) throw new Error("expected a task");
    const main = await a2aClient("main", GATEWAY);
    await expect(main.getTask({ tenant: "", id: task.id })).rejects.toThrow(/Task not found/);
    expect(
      (await call("POST", "/a2a/main", { jsonrpc: "2.0", id: 1, method: "GetTask" }, { token: null })).status,
    ).toBe(401);
  });

  it("refusals: a run token; no A2A-Version; a taskId; a file part; a context outside the agent's keys; the id and context maxima", async () => {
    const fake = useFakeProvider();
    const held = await call("POST", "/v1/sessions/main/messages", { message: "hold" });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const runToken = await mintRunToken(env.SIGNING_SECRET as string, {
      runId: held.json.runId,
      sessionKey: held.json.sessionKey,
      agentId: "main",
      isSubagent: false,
      expiresAt: Date.now() + 60_000,
    });
    const rpc = (method: string, params: unknown, opts: { token?: string; version?: string | null } = {}) =>
      call(
        "POST",
        "/a2a/main",
        { jsonrpc: "2.0", id: 3, method, params },
        {
          token: opts.token ?? GATEWAY,
          headers: opts.version === null ? {} : { "A2A-Version": opts.version ?? "1.0" },
        },
      );
    const byRun = await rpc("GetTask", { id: held.json.runId }, { token: runToken });
    expect(byRun.status).toBe(403);
    expect(byRun.json.error.message).toBe("A2A needs the gateway token or the agent's token, not a run token");
    expect((await rpc("GetTask", { id: held.json.runId }, { version: null })).json.error.code).toBe(-32009);
    // The REST-started run is a task of the agent, in its main context.
    expect((await rpc("GetTask", { id: held.json.runId })).json.result).toMatchObject({
      id: held.json.runId,
      contextId: "main",
      status: { state: "TASK_STATE_WORKING" },
    });
    const message = (extra: Record<string, unknown>, parts: unknown[] = [{ text: "hi" }]) => ({
      message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts, ...extra },
    });
    const withTask = await rpc("SendMessage", message({ taskId: held.json.runId }));
    expect(withTask.json.error).toMatchObject({
      code: -32004,
      message: "Each message starts a new task: continue the conversation with its contextId, not a taskId",
    });
    const file = await rpc("SendMessage", message({}, [{ url: "https://files.test/a.png" }]));
    expect(file.json.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^Only text and data parts/),
    });
    const bad = await rpc("SendMessage", message({ contextId: "two  spaces" }));
    expect(bad.json.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/^contextId "two {2}spaces" is not usable/),
    });
    // The documented maxima (docs/limits.md), refused by name before any session is touched.
    const longContext = await rpc("SendMessage", message({ contextId: "c".repeat(A2A_MAX_CONTEXT_ID + 1) }));
    expect(longContext.json.error).toMatchObject({
      code: -32602,
      message: `contextId: at most ${A2A_MAX_CONTEXT_ID} characters`,
    });
    const longId = await rpc("SendMessage", {
      message: { messageId: "m".repeat(201), role: "ROLE_USER", parts: [{ text: "hi" }] },
    });
    expect(longId.json.error).toMatchObject({ code: -32602, message: "message.messageId: at most 200 characters" });
    // Push configs are served (test/a2a/a2a-push.test.ts); a plain-http receiver is malformed.
    expect(
      (await rpc("CreateTaskPushNotificationConfig", { taskId: held.json.runId, url: "http://x.test" })).json.error,
    ).toMatchObject({ code: -32602, message: expect.stringMatching(/^url: expected a public https/) });
    fake.pending()[0].reply("done");
  });
});

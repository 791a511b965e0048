import { runDurableObjectAlarm } from "cloudflare:test";
import { SendMessageRequest, StreamResponse, TaskState } from "@a2a-js/sdk";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, type MockInstance, vi } from "vitest";
import { MAX_PUSH_CONFIGS_PER_TASK } from "../../src/a2a/push-store";
import { MAX_DELIVERY_ATTEMPTS, nextRetryDelayMs } from "../../src/channels/webhook";
import { a2aClient, textMessage } from "../helpers/a2a";
import { useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, RESEARCH_TOKEN, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { deliveriesOf, until } from "../helpers/scripted";

const RECEIVER = "https://receiver.test/a2a/notify";

interface Received {
  headers: Record<string, string>;
  rawBody: string;
}

/** A push config for a task as the A2A client sends it: RECEIVER, a blank id and token unless `fields` says. */
function pushConfig(taskId: string, fields: Record<string, unknown> = {}) {
  return { tenant: "", taskId, id: "", url: RECEIVER, token: "", authentication: undefined, ...fields };
}

/** A message to "main" through the official A2A client, answered as a task, and the session it runs in. */
async function sentTask(text: string) {
  const client = await a2aClient("main");
  const task = await client.sendMessage(textMessage(text));
  if (!("id" in task)) throw new Error("expected a task");
  return { client, task, sessionKey: `agent:main:${task.contextId}` };
}

/**
 * A push receiver on the `fetch` the objects use (no network): it records every POST to RECEIVER and answers
 * `status()`; anything else goes to whatever `fetch` was before (the fake model provider, when installed).
 */
function receiver() {
  const got: Received[] = [];
  const state = { status: () => 200 };
  const spied = vi.isMockFunction(globalThis.fetch) ? (globalThis.fetch as unknown as MockInstance) : null;
  const before = spied?.getMockImplementation() ?? globalThis.fetch.bind(globalThis);
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(RECEIVER)) return (before as typeof fetch)(input, init);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => {
      headers[k] = v;
    });
    got.push({ headers, rawBody: String(init?.body) });
    return new Response(null, { status: state.status() });
  });
  return { got, state };
}

/**
 * What a receiver does (docs/protocols.md, "Verifying a notification"): the token it set is in
 * `X-A2A-Notification-Token`, and the Standard Webhooks signature verifies with that token as the raw key.
 * Answers the notified task, or throws.
 */
function verify(r: Received, token: string) {
  if (r.headers["x-a2a-notification-token"] !== token) throw new Error("wrong token");
  const payload = new Webhook(new TextEncoder().encode(token), { format: "raw" }).verify(r.rawBody, r.headers);
  const task = StreamResponse.fromJSON(payload).payload;
  if (task?.$case !== "task") throw new Error("not a task");
  return task.value;
}

const replyOf = (task: { artifacts: { parts: { content?: { value: unknown } }[] }[] }) =>
  task.artifacts.map((a) => a.parts.map((p) => p.content?.value).join("")).join("");

/** Run the session's alarm until `check` holds (a delivery's attempt is the alarm's, due now). */
async function alarmUntil(sessionKey: string, check: () => void) {
  await vi.waitFor(
    async () => {
      await runDurableObjectAlarm(sessionStub(sessionKey));
      check();
    },
    { timeout: 10_000, interval: 20 },
  );
}

describe("A2A push notifications (official A2A JS client, a receiver that verifies)", () => {
  it("a config sent with the message: working, then completed, each signed, with the token and the authentication", async () => {
    const fake = useFakeProvider();
    const { got } = receiver();
    const client = await a2aClient("main");
    const token = "receiver-chosen-token";
    const sent = await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "hold" }] },
        configuration: {
          returnImmediately: true,
          taskPushNotificationConfig: {
            id: "hook-1",
            url: RECEIVER,
            token,
            authentication: { scheme: "Bearer", credentials: "receiver-secret" },
          },
        },
      }),
    );
    if (!("id" in sent)) throw new Error("expected a task");
    const sessionKey = `agent:main:${sent.contextId}`;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await alarmUntil(sessionKey, () => expect(got).toHaveLength(1));
    const working = verify(got[0], token);
    expect([working.id, working.status?.state]).toEqual([sent.id, TaskState.TASK_STATE_WORKING]);
    expect(got[0].headers.authorization).toBe("Bearer receiver-secret");
    expect(got[0].headers["content-type"]).toBe("application/a2a+json");
    expect(got[0].headers["webhook-id"]).toBe(`a2a-push:hook-1:${sent.id}:running`);

    fake.pending()[0].reply("the pushed reply");
    await until(async () => expect(got).toHaveLength(2));
    const done = verify(got[1], token);
    expect([done.id, done.status?.state, replyOf(done)]).toEqual([
      sent.id,
      TaskState.TASK_STATE_COMPLETED,
      "the pushed reply",
    ]);
    // A tampered body, or another key, does not verify.
    expect(() => verify({ ...got[1], rawBody: got[1].rawBody.replace("pushed", "forged") }, token)).toThrow();
    expect(() => verify(got[1], "another-token")).toThrow();

    // The deliveries are the outbox's, visible over /v1 — without the token or the credentials.
    const listed = await call("GET", `/v1/sessions/${enc(sessionKey)}/deliveries`);
    expect(listed.status).toBe(200);
    expect(
      listed.json.deliveries.map((d: any) => [d.kind, d.status, d.channel, d.payload.to, d.attempts]).sort(),
    ).toEqual([
      ["a2a_push", "delivered", "a2a", RECEIVER, 1],
      ["a2a_push", "delivered", "a2a", RECEIVER, 1],
    ]);
    expect(JSON.stringify(listed.json)).not.toMatch(/receiver-secret|receiver-chosen-token/);

    // Read back over A2A: the token (the receiver's key), never the credentials.
    const config = await client.getTaskPushNotificationConfig({ tenant: "", taskId: sent.id, id: "hook-1" });
    expect(config).toMatchObject({ id: "hook-1", taskId: sent.id, url: RECEIVER, token });
    expect(config.authentication).toEqual({ scheme: "Bearer", credentials: "[redacted]" });
    // Ended and notified: nothing more is sent.
    await advance(sessionKey, 60 * 60_000);
    expect(got).toHaveLength(2);
  });

  it("a task queued behind another: nothing while it waits, `working` written with its start, then its end", async () => {
    const fake = useFakeProvider();
    const { got } = receiver();
    const client = await a2aClient("main");
    const first = await client.sendMessage(textMessage("hold", { returnImmediately: true }));
    if (!("id" in first)) throw new Error("expected a task");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const second = await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: {
          messageId: crypto.randomUUID(),
          role: "ROLE_USER",
          parts: [{ text: "hold" }],
          contextId: first.contextId,
        },
        configuration: {
          returnImmediately: true,
          taskPushNotificationConfig: { id: "queued", url: RECEIVER, token: "q" },
        },
      }),
    );
    if (!("id" in second)) throw new Error("expected a task");
    expect(second.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const sessionKey = `agent:main:${first.contextId}`;
    await runDurableObjectAlarm(sessionStub(sessionKey));
    expect(got).toHaveLength(0);
    fake.pending()[0].reply("first done");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    await alarmUntil(sessionKey, () => expect(got).toHaveLength(1));
    expect([verify(got[0], "q").id, verify(got[0], "q").status?.state]).toEqual([
      second.id,
      TaskState.TASK_STATE_WORKING,
    ]);
    fake.pending()[0].reply("second done");
    await until(async () => expect(got).toHaveLength(2));
    expect(verify(got[1], "q").status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("a SendMessage sent again with its config (no id, no token) is the same task with the same config and key", async () => {
    const { got } = receiver();
    const client = await a2aClient("main");
    const request = SendMessageRequest.fromJSON({
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "sent twice" }],
        contextId: `retried-${crypto.randomUUID()}`,
      },
      configuration: { taskPushNotificationConfig: { url: RECEIVER } },
    });
    const once = await client.sendMessage(request);
    if (!("id" in once)) throw new Error("expected a task");
    const ref = { tenant: "", taskId: once.id, id: "send" };
    const token = (await client.getTaskPushNotificationConfig(ref)).token;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const twice = await client.sendMessage(request);
    expect("id" in twice && twice.id).toBe(once.id);
    const listed = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: once.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(listed.configs.map((c) => [c.id, c.token])).toEqual([["send", token]]);
    // Every notification (`working` if the run had not started when the config was stored, then `completed`)
    // verifies with that one key.
    await alarmUntil(`agent:main:${once.contextId}`, () =>
      expect(got.map((r) => verify(r, token).status?.state).at(-1)).toBe(TaskState.TASK_STATE_COMPLETED),
    );
  });

  it("set, list, get and delete on a task; a config set on an ended task sends its final state once; no token: one is made", async () => {
    const { got } = receiver();
    const { client, task, sessionKey } = await sentTask("already done");
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const made = await client.createTaskPushNotificationConfig(pushConfig(task.id));
    expect(made.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(made.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await alarmUntil(sessionKey, () => expect(got).toHaveLength(1));
    expect(replyOf(verify(got[0], made.token))).toBe("already done");
    expect(got[0].headers.authorization).toBeUndefined();
    // Setting it again (same id) sends nothing new: that state was notified to that config.
    await client.createTaskPushNotificationConfig({ ...made, authentication: undefined });
    const listed = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(listed.configs.map((c) => c.id)).toEqual([made.id]);
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: made.id });
    await expect(client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: made.id })).rejects.toThrow(
      /not found/,
    );
    // Deleting what is not there is the outcome asked for.
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: made.id });
    await advance(sessionKey, 60 * 60_000);
    expect(got).toHaveLength(1);
  });

  it("a failing receiver: retried with the outbox's backoff across a restart, dead after the attempt limit, re-queued by an operator", async () => {
    const { got, state } = receiver();
    state.status = () => 503;
    const { client, task, sessionKey } = await sentTask("for a flaky receiver");
    await client.createTaskPushNotificationConfig(pushConfig(task.id, { id: "flaky", token: "flaky-token" }));
    await alarmUntil(sessionKey, () => expect(got).toHaveLength(1));
    await advance(sessionKey, nextRetryDelayMs(1));
    expect(got).toHaveLength(2);
    // The config and the pending delivery are rows: the object, restarted, picks them up again.
    await crash(sessionStub(sessionKey));
    for (let i = 2; i < MAX_DELIVERY_ATTEMPTS; i++) await advance(sessionKey, nextRetryDelayMs(i));
    expect(got).toHaveLength(MAX_DELIVERY_ATTEMPTS);
    // Every attempt is the same notification: one id a receiver de-duplicates on, each one verifiable.
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([`a2a-push:flaky:${task.id}:ok`]));
    for (const r of got) expect(verify(r, "flaky-token").id).toBe(task.id);
    const dead = await deliveriesOf(sessionKey, "dead");
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ kind: "a2a_push", attempts: MAX_DELIVERY_ATTEMPTS, lastError: "HTTP 503" });
    await advance(sessionKey, 60 * 60_000);
    expect(got).toHaveLength(MAX_DELIVERY_ATTEMPTS);

    state.status = () => 200;
    const retried = await call("POST", `/v1/sessions/${enc(sessionKey)}/deliveries/${dead[0].id}/retry`);
    expect(retried.json).toMatchObject({ status: "delivered", attempts: 1 });
    expect(got).toHaveLength(MAX_DELIVERY_ATTEMPTS + 1);
  });

  it("a config deleted while its notification waits: the delivery ends dead and says so, nothing is sent", async () => {
    const { got, state } = receiver();
    state.status = () => 500;
    const { client, task, sessionKey } = await sentTask("then withdrawn");
    const ref = { tenant: "", taskId: task.id, id: "gone" };
    await client.createTaskPushNotificationConfig({ ...ref, url: RECEIVER, token: "t", authentication: undefined });
    await alarmUntil(sessionKey, () => expect(got).toHaveLength(1));
    await client.deleteTaskPushNotificationConfig(ref);
    await advance(sessionKey, nextRetryDelayMs(1));
    expect(got).toHaveLength(1);
    expect((await deliveriesOf(sessionKey, "dead"))[0]).toMatchObject({
      lastError: "push notification config gone was deleted",
    });
  });

  it("refusals: non-https and private URLs, credentials in the URL, bad auth, the per-task limit, another agent's task", async () => {
    const { got } = receiver();
    const { client, task } = await sentTask("limits");
    const set = (url: string, extra: Record<string, unknown> = {}) =>
      client.createTaskPushNotificationConfig(pushConfig(task.id, { url, ...extra }));
    const rule = /^url: expected a public https:\/\/ URL/;
    for (const url of [
      "http://receiver.test/x",
      "https://localhost/x",
      "https://api.localhost/x",
      "https://printer.local/x",
      "https://10.1.2.3/x",
      "https://127.0.0.1/x",
      "https://2130706433/x",
      "https://169.254.169.254/latest",
      "https://192.168.0.1/x",
      "https://172.20.0.1/x",
      "https://[::1]/x",
      "https://[fd00::1]/x",
      "https://[::ffff:10.0.0.1]/x",
      "https://user:pw@receiver.test/x",
      "not a url",
    ])
      await expect(set(url), url).rejects.toThrow(rule);
    await expect(set(`https://receiver.test/${"x".repeat(2048)}`)).rejects.toThrow(/url: at most 2048 characters/);
    await expect(set(RECEIVER, { authentication: { scheme: "Bad Scheme", credentials: "x" } })).rejects.toThrow(
      /authentication.scheme/,
    );
    await expect(set(RECEIVER, { id: "has:colon" })).rejects.toThrow(/^id: /);
    for (let i = 0; i < MAX_PUSH_CONFIGS_PER_TASK; i++) await set(RECEIVER, { id: `c${i}` });
    await expect(set(RECEIVER, { id: "one-too-many" })).rejects.toThrow(
      `Task ${task.id} already has ${MAX_PUSH_CONFIGS_PER_TASK} push notification configs (docs/limits.md): delete one first`,
    );
    // Replacing one that exists is not a new one.
    await set(`${RECEIVER}/other`, { id: "c0" });
    // Each config got the ended task's final state once (the replaced one already had it).
    await alarmUntil(`agent:main:${task.contextId}`, () => expect(got).toHaveLength(MAX_PUSH_CONFIGS_PER_TASK));
    // A task of another agent is not found under this one; the other agent's own token cannot act as this agent.
    const research = await a2aClient("research", RESEARCH_TOKEN);
    await expect(research.createTaskPushNotificationConfig(pushConfig(task.id))).rejects.toThrow(/Task not found/);
    // A bad config in SendMessage is refused before any run exists.
    const runsBefore = await call("GET", `/v1/sessions/${enc(`agent:main:${task.contextId}`)}/runs`);
    await expect(
      client.sendMessage(
        SendMessageRequest.fromJSON({
          message: {
            messageId: crypto.randomUUID(),
            role: "ROLE_USER",
            parts: [{ text: "x" }],
            contextId: task.contextId,
          },
          configuration: { taskPushNotificationConfig: { url: "http://insecure.test/x" } },
        }),
      ),
    ).rejects.toThrow(rule);
    const runsAfter = await call("GET", `/v1/sessions/${enc(`agent:main:${task.contextId}`)}/runs`);
    expect(runsAfter.json.runs).toHaveLength(runsBefore.json.runs.length);
  });
});

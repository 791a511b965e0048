import { describe, expect, it, vi } from "vitest";
import { A2A_REST_OPERATIONS, type Answer, Contract, type Doc, request } from "../helpers/contract";
import { useFakeProvider } from "../helpers/fake-provider";
import { RESEARCH_TOKEN } from "../helpers/http";

/**
 * The A2A HTTP+JSON binding's routes of /openapi.json (docs/protocols.md, "A2A"), driven for real as
 * test/http/openapi-contract.test.ts drives the others: each answer validated against its documented schema, and
 * the last test fails on any documented answer of these routes that no request produced (their 401, 413, 429 and
 * 500 are produced there). Behaviour: test/a2a/a2a-rest.test.ts.
 */

let contract: Contract;
const check = (op: string, a: Answer | Promise<Answer>) => Promise.resolve(a).then((x) => contract.check(op, x));
const V1 = { "A2A-Version": "1.0" };
const a2a = (
  method: string,
  path: string,
  body?: unknown,
  opts: { token?: string; headers?: Record<string, string> } = {},
) => request(method, path, body, { token: opts.token, headers: { ...V1, ...(opts.headers ?? {}) } });
const message = (text: string, extra: Record<string, unknown> = {}) => ({
  message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] },
  ...extra,
});

describe("the A2A HTTP+JSON binding's responses match /openapi.json", () => {
  it("each operation's success, its A2A errors and its access errors", async () => {
    contract = new Contract((await request("GET", "/openapi.json", undefined, { token: null })).json as Doc);
    // Every turn answers at once but "hold", which stays running until cancelled.
    const fake = useFakeProvider({ auto: (c) => (c.lastUser === "hold" ? undefined : c.reply(`re: ${c.lastUser}`)) });
    const send = "POST /a2a/{agentId}/message:send";
    const sent = await check(send, a2a("POST", "/a2a/main/message:send", message("contract")));
    expect(sent.status).toBe(200);
    const id = sent.json.task.id as string;
    expect((await check(send, a2a("POST", "/a2a/main/message:send", {}))).status).toBe(400);
    expect(
      (await check(send, a2a("POST", "/a2a/main/message:send", message("x"), { token: RESEARCH_TOKEN }))).status,
    ).toBe(403);
    expect((await check(send, a2a("POST", "/a2a/nobody/message:send", message("x")))).status).toBe(404);

    const stream = "POST /a2a/{agentId}/message:stream";
    expect((await check(stream, a2a("POST", "/a2a/main/message:stream", message("streamed")))).status).toBe(200);
    expect((await check(stream, a2a("POST", "/a2a/main/message:stream", {}))).status).toBe(400);
    expect(
      (await check(stream, a2a("POST", "/a2a/main/message:stream", message("x"), { token: RESEARCH_TOKEN }))).status,
    ).toBe(403);
    expect((await check(stream, a2a("POST", "/a2a/nobody/message:stream", message("x")))).status).toBe(404);

    const get = "GET /a2a/{agentId}/tasks/{taskRef}";
    expect((await check(get, a2a("GET", `/a2a/main/tasks/${id}`))).json.status.state).toBe("TASK_STATE_COMPLETED");
    expect(
      (await check(get, a2a("GET", `/a2a/main/tasks/${id}`, undefined, { headers: { "A2A-Version": "" } }))).status,
    ).toBe(400);
    expect((await check(get, a2a("GET", `/a2a/main/tasks/${id}`, undefined, { token: RESEARCH_TOKEN }))).status).toBe(
      403,
    );
    expect((await check(get, a2a("GET", "/a2a/main/tasks/no-such-task"))).status).toBe(404);

    const post = "POST /a2a/{agentId}/tasks/{taskRef}";
    const held = await a2a(
      "POST",
      "/a2a/main/message:send",
      message("hold", { configuration: { returnImmediately: true } }),
    );
    const heldId = held.json.task.id as string;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const subscribed = await check(post, a2a("POST", `/a2a/main/tasks/${heldId}:subscribe`));
    expect(subscribed.headers.get("Content-Type")).toMatch(/^text\/event-stream/);
    expect((await check(post, a2a("POST", `/a2a/main/tasks/${heldId}:cancel`))).json.status.state).toBe(
      "TASK_STATE_CANCELED",
    );
    expect((await check(post, a2a("POST", `/a2a/main/tasks/${heldId}:cancel`))).status).toBe(400);
    expect(
      (await check(post, a2a("POST", `/a2a/main/tasks/${id}:cancel`, undefined, { token: RESEARCH_TOKEN }))).status,
    ).toBe(403);
    expect((await check(post, a2a("POST", "/a2a/main/tasks/no-such-task:cancel"))).status).toBe(404);

    const configs = `/a2a/main/tasks/${id}/pushNotificationConfigs`;
    const create = "POST /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs";
    // A URL nothing answers: its one notification ends a dead letter, no network (docs/protocols.md).
    vi.spyOn(globalThis, "fetch").mockResolvedValue(new Response(null, { status: 410 }));
    const cfg = { id: "contract", url: "https://receiver.test/contract", token: "t" };
    expect((await check(create, a2a("POST", configs, cfg))).status).toBe(201);
    expect((await check(create, a2a("POST", configs, { ...cfg, url: "http://receiver.test/x" }))).status).toBe(400);
    expect((await check(create, a2a("POST", configs, cfg, { token: RESEARCH_TOKEN }))).status).toBe(403);
    expect((await check(create, a2a("POST", "/a2a/main/tasks/no-such-task/pushNotificationConfigs", cfg))).status).toBe(
      404,
    );

    const list = "GET /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs";
    expect((await check(list, a2a("GET", configs))).json.configs).toHaveLength(1);
    expect((await check(list, a2a("GET", configs, undefined, { headers: { "A2A-Version": "" } }))).status).toBe(400);
    expect((await check(list, a2a("GET", configs, undefined, { token: RESEARCH_TOKEN }))).status).toBe(403);
    expect((await check(list, a2a("GET", "/a2a/main/tasks/no-such-task/pushNotificationConfigs"))).status).toBe(404);

    for (const [op, method, ok] of [
      ["GET /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs/{configId}", "GET", 200],
      ["DELETE /a2a/{agentId}/tasks/{taskId}/pushNotificationConfigs/{configId}", "DELETE", 204],
    ] as const) {
      expect((await check(op, a2a(method, `${configs}/contract`))).status).toBe(ok);
      expect(
        (await check(op, a2a(method, `${configs}/contract`, undefined, { headers: { "A2A-Version": "" } }))).status,
      ).toBe(400);
      expect((await check(op, a2a(method, `${configs}/contract`, undefined, { token: RESEARCH_TOKEN }))).status).toBe(
        403,
      );
      expect((await check(op, a2a(method, "/a2a/nobody/tasks/x/pushNotificationConfigs/y"))).status).toBe(404);
    }
  });

  it("every documented answer of the binding's routes was produced and matched its schema", () => {
    const unseen = contract
      .documented()
      .filter((d) => A2A_REST_OPERATIONS.some((op) => d.startsWith(`${op} `)) && !/ (401|413|429|500)$/.test(d))
      .filter((d) => !contract.seen.has(d));
    expect(unseen).toEqual([]);
  });
});

import { Webhook } from "standardwebhooks";
import { beforeEach, describe, expect, it } from "vitest";
import { verifyWebhookSignature } from "../../src/channels/signed-webhook";
import { setConfigOverride } from "../../src/config/load";
import { capText, MESSAGE_MAX_BYTES, truncationMarker } from "../../src/session/byte-budget";
import { LEASE_MS } from "../../src/session/run-types";
import {
  getRun,
  installFakeRuntime,
  newKey,
  posted,
  RUNTIME_SECRET,
  RUNTIME_URL,
  runtime,
  send,
} from "../helpers/fake-runtime";
import { advance, call, enc, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { until } from "../helpers/scripted";

beforeEach(() => installFakeRuntime());

describe("webhook agent runtimes", () => {
  it("sync: the run is POSTed signed with its context and a run token; a 200 {reply} is the reply", async () => {
    runtime.respond = () => Response.json({ reply: "hello from outside", usage: { input: 7, output: 3 } });
    const key = newKey();
    const runId = await send(key, "hi runtime");
    const run = (await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json;
    expect(run).toMatchObject({
      runId,
      sessionKey: key,
      status: "ok",
      reply: "hello from outside",
      usage: { input: 7, output: 3, totalTokens: 10 },
      model: "webhook/hook",
    });

    expect(runtime.received).toHaveLength(1);
    const { req, headers, raw } = runtime.received[0];
    expect(req).toMatchObject({
      type: "switchboard.run",
      runId,
      attempt: 1,
      sessionKey: key,
      agentId: "hook",
      isSubagent: false,
      kind: "inbound",
      message: "hi runtime",
      provenance: { kind: "external_user" },
      completePath: `/v1/runs/${runId}/complete`,
    });
    expect(req.runToken).toMatch(/^sbrun\./);
    expect(headers.get("Idempotency-Key")).toBe(runId);
    const ts = headers.get("X-Switchboard-Timestamp")!;
    expect(await verifyWebhookSignature(RUNTIME_SECRET, ts, raw, headers.get("X-Switchboard-Signature"))).toBe(true);
    // Standard Webhooks: webhook-id is the run id (stable across a retried attempt); the standardwebhooks library verifies it.
    const standard = {
      "webhook-id": headers.get("webhook-id")!,
      "webhook-timestamp": headers.get("webhook-timestamp")!,
      "webhook-signature": headers.get("webhook-signature")!,
    };
    expect(standard["webhook-id"]).toBe(runId);
    expect(new Webhook(new TextEncoder().encode(RUNTIME_SECRET), { format: "raw" }).verify(raw, standard)).toEqual(req);
    expect(() =>
      new Webhook(new TextEncoder().encode("not-the-secret"), { format: "raw" }).verify(raw, standard),
    ).toThrow();

    const history = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json;
    expect(history.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
    expect(history.messages[1].content).toEqual([{ type: "text", text: "hello from outside" }]);

    // The token died with the run.
    const late = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token: req.runToken },
    );
    expect(late.status).toBe(401);
    expect(late.json.error.message).toBe(`Run token no longer valid: run ${runId} has ended (ok)`);
  });

  it("the run token acts only as its run's session while the run is running", async () => {
    const key = newKey();
    let during: { own: unknown; other: unknown; list: unknown } | undefined;
    runtime.respond = async (req) => {
      const own = await call(
        "POST",
        "/tools/invoke",
        { tool: "sessions_history", args: { sessionKey: "current" } },
        { token: req.runToken },
      );
      const other = await call(
        "POST",
        "/tools/invoke",
        { tool: "sessions_list", args: {}, sessionKey: "agent:hook:main" },
        { token: req.runToken },
      );
      const list = await call("GET", `/v1/sessions/${enc("agent:main:main")}`, undefined, { token: req.runToken });
      during = {
        own: [own.status, own.json.result?.details?.sessionKey, own.json.result?.details?.messages?.length],
        other: [other.status, other.json.error?.message],
        list: list.status,
      };
      return Response.json({ reply: "done" });
    };
    const runId = await send(key, "look around");
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json.status).toBe("ok");
    expect(during).toEqual({
      own: [200, key, 1],
      other: [403, `This run token may only act as session ${key}`],
      list: 403,
    });
  });

  it("replies over limits.maxMessageBytes, sync or through /complete, are stored truncated with a marker, never refused (docs/limits.md)", async () => {
    const big = "z".repeat(MESSAGE_MAX_BYTES + 50_000);
    runtime.respond = () => Response.json({ reply: big });
    const key = newKey();
    const syncRun = await send(key, "sync please");
    const sync = (await call("GET", `/v1/runs/${syncRun}/wait?timeoutMs=10000`)).json;
    expect(sync.status).toBe("ok");
    expect(sync.reply).toBe(capText(big, MESSAGE_MAX_BYTES));
    expect(sync.reply.endsWith(truncationMarker(MESSAGE_MAX_BYTES))).toBe(true);

    runtime.respond = () => new Response(null, { status: 202 });
    const asyncRun = await send(key, "later please");
    await until(async () => expect(runtime.received).toHaveLength(2));
    const done = await call(
      "POST",
      `/v1/runs/${asyncRun}/complete`,
      { reply: big },
      { token: runtime.received[1].req.runToken },
    );
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ status: "ok", reply: capText(big, MESSAGE_MAX_BYTES) });
    const history = (await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json as string;
    const texts = history
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((l) => l.message?.role === "assistant")
      .map((l) => l.message.content[0].text);
    expect(texts).toEqual([capText(big, MESSAGE_MAX_BYTES), capText(big, MESSAGE_MAX_BYTES)]);
  });

  it("async: 202, the run stays running, then POST /v1/runs/{id}/complete with the run token ends it", async () => {
    runtime.respond = () => new Response(null, { status: 202 });
    const key = newKey();
    const runId = await send(key, "take your time");
    await posted();
    const { runToken } = runtime.received[0].req;
    expect((await getRun(runId)).status).toBe("running");

    // Only the run's own token may complete it; bodies are validated.
    const byOperator = await call("POST", `/v1/runs/${runId}/complete`, { reply: "x" });
    expect(byOperator).toMatchObject({
      status: 403,
      json: { ok: false, error: { type: "forbidden", message: `Only the run token of run ${runId} may complete it` } },
    });
    const both = await call("POST", `/v1/runs/${runId}/complete`, { reply: "x", error: "y" }, { token: runToken });
    expect(both).toMatchObject({
      status: 400,
      json: { error: { message: "body: send exactly one of reply or error" } },
    });
    const wrongType = await call("POST", `/v1/runs/${runId}/complete`, { reply: 5 }, { token: runToken });
    expect(wrongType.status).toBe(400);
    expect(wrongType.json.error.message).toMatch(/^reply: /);

    const done = await call("POST", `/v1/runs/${runId}/complete`, { reply: "finished later" }, { token: runToken });
    expect(done.status).toBe(200);
    expect(done.json).toMatchObject({ runId, status: "ok", reply: "finished later" });
    expect(await getRun(runId)).toMatchObject({ status: "ok", reply: "finished later" });

    // A second completion is refused: the token ended with the run.
    const again = await call("POST", `/v1/runs/${runId}/complete`, { reply: "again" }, { token: runToken });
    expect(again.status).toBe(401);

    // The queue moves on: the next message is POSTed to the runtime too.
    runtime.respond = () => Response.json({ reply: "next" });
    const next = await send(key, "second");
    expect((await call("GET", `/v1/runs/${next}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "ok",
      reply: "next",
    });
  });

  it("async with {error}: the run ends error with that message", async () => {
    const key = newKey();
    const runId = await send(key, "fail please");
    await posted();
    const r = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { error: "runtime crashed" },
      { token: runtime.received[0].req.runToken },
    );
    expect(r.json).toMatchObject({ status: "error", error: "runtime crashed" });
  });

  it("an awaiting run survives the loss of the object's memory: its lease does not retry it, completion still lands", async () => {
    const key = newKey();
    const runId = await send(key, "long job");
    await posted();
    // The run's executor awaits the runtime's completion in memory: it is lost with the instance.
    await crash(sessionStub(key));
    // Past the lease: a lost built-in run would be re-queued and POSTed again here.
    await advance(key, LEASE_MS + 1_000);
    expect(await getRun(runId)).toMatchObject({ status: "running" });
    expect(runtime.received).toHaveLength(1);
    const r = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { reply: "after restart" },
      { token: runtime.received[0].req.runToken },
    );
    expect(r.json).toMatchObject({ status: "ok", reply: "after restart" });
  });

  it("a run retried after an eviction is POSTed again with the same webhook-id (the run id), freshly signed", async () => {
    let calls = 0;
    runtime.respond = () => (++calls === 1 ? new Promise<Response>(() => {}) : Response.json({ reply: "second try" }));
    const key = newKey();
    const runId = await send(key, "retry me");
    await posted();
    // Its POST never answers: the executor is lost with the instance.
    await crash(sessionStub(key));
    // The lease notices the lost executor and runs the same run again (attempt 2).
    await advance(key, LEASE_MS + 1_000);
    await until(async () => expect(runtime.received).toHaveLength(2));
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "ok",
      reply: "second try",
    });
    expect(
      runtime.received.map((r) => [r.req.attempt, r.headers.get("webhook-id"), r.headers.get("Idempotency-Key")]),
    ).toEqual([
      [1, runId, runId],
      [2, runId, runId],
    ]);
    const verifier = new Webhook(new TextEncoder().encode(RUNTIME_SECRET), { format: "raw" });
    for (const { raw, headers, req } of runtime.received) {
      const standard = {
        "webhook-id": headers.get("webhook-id")!,
        "webhook-timestamp": headers.get("webhook-timestamp")!,
        "webhook-signature": headers.get("webhook-signature")!,
      };
      expect(verifier.verify(raw, standard)).toEqual(req);
    }
  });

  it("a sub-agent run token gets the sub-agent tool set: sessions_spawn and the session tools are 404", async () => {
    const key = newKey(`subagent:${crypto.randomUUID()}`);
    const runId = await send(key, "child task");
    await posted();
    const { req } = runtime.received[0];
    expect(req).toMatchObject({ runId, isSubagent: true });
    const spawn = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_spawn", args: { task: "grandchild" } },
      { token: req.runToken },
    );
    expect(spawn).toMatchObject({
      status: 404,
      json: { ok: false, error: { type: "not_found", message: "Tool not available for this session: sessions_spawn" } },
    });
    const list = await call("POST", "/tools/invoke", { tool: "sessions_list", args: {} }, { token: req.runToken });
    expect(list.status).toBe(404);
    await call("POST", `/v1/runs/${runId}/complete`, { reply: "child done" }, { token: req.runToken });
    expect((await getRun(runId)).status).toBe("ok");
  });

  it("owner commands (/send off) are answered by the gateway, never POSTed to the runtime", async () => {
    const key = newKey();
    const runId = await send(key, "/send off", { senderIsOwner: true });
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json.status).toBe("ok");
    expect(runtime.received).toHaveLength(0);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("deny");
  });

  it("agent-to-agent context reaches the runtime: sessions_send into a webhook agent carries provenance and extraSystemPrompt", async () => {
    setConfigOverride({
      agents: {
        list: [
          { id: "main", default: true },
          { id: "hook", runtime: { type: "webhook", url: RUNTIME_URL, secret: RUNTIME_SECRET } },
        ],
      },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      session: { agentToAgent: { maxPingPongTurns: 0 } },
    });
    runtime.respond = () => Response.json({ reply: "ANNOUNCE_SKIP" });
    const target = newKey();
    const r = await call("POST", "/tools/invoke", {
      tool: "sessions_send",
      args: { sessionKey: target, message: "question from main", timeoutSeconds: 10 },
    });
    expect(r.status).toBe(200);
    expect(r.json.result.details).toMatchObject({ status: "ok", reply: "ANNOUNCE_SKIP" });
    const first = runtime.received[0].req;
    expect(first).toMatchObject({
      sessionKey: target,
      message: "question from main",
      provenance: { kind: "inter_session", sourceTool: "sessions_send" },
    });
    expect(first.extraSystemPrompt).toBeTruthy();
  });
});

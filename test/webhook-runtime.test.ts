import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { verifyWebhookSignature } from "../src/channels/signed-webhook";
import { setConfigOverride } from "../src/config/load";
import { mintRunToken } from "../src/runners/run-token";
import type { WebhookRunRequest } from "../src/runners/webhook-runner";
import { capText, MESSAGE_MAX_BYTES, truncationMarker } from "../src/session/byte-budget";
import { LEASE_MS } from "../src/session/run-types";
import { timeouts } from "../src/timeout-signal";
import { advance, call, enc } from "./helpers/http";
import { until } from "./helpers/scripted";

const RUNTIME_URL = "https://runtime.test/agent";
const RUNTIME_SECRET = "runtime-secret";

/** A fake agent runtime living "outside": it sees every run POST and answers with `respond`. */
let received: { req: WebhookRunRequest; headers: Headers; raw: string }[] = [];
let respond: (run: WebhookRunRequest, init?: RequestInit) => Promise<Response> | Response = () =>
  new Response(null, { status: 202 });

/**
 * Until the fake runtime has received a run's POST. Polled from the test's own timers, never a promise the fake
 * resolves: the fake runs inside the session object's run (same isolate), and a promise it resolves resumes the test
 * inside that object's timer task (the run starts from a timer, src/session/enqueue.ts). The test's next calls would
 * then be that object's I/O, and abortAllDurableObjects() from there aborts the object from inside its own task,
 * which crashes workerd ("Promise callback destroyed itself") and loses the rest of the file.
 */
const posted = () => until(async () => expect(received.length).toBeGreaterThan(0));

beforeEach(() => {
  received = [];
  respond = () => new Response(null, { status: 202 });
  setConfigOverride({
    agents: {
      defaults: { timeoutSeconds: 120 },
      list: [
        { id: "main", default: true },
        { id: "hook", runtime: { type: "webhook", url: RUNTIME_URL, secret: RUNTIME_SECRET } },
      ],
    },
  });
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.startsWith(RUNTIME_URL)) return realFetch(input, init);
    const raw = String(init?.body);
    const req = JSON.parse(raw) as WebhookRunRequest;
    received.push({ req, headers: new Headers(init?.headers), raw });
    return respond(req, init);
  });
});
afterEach(() => {
  setConfigOverride(null);
  vi.restoreAllMocks();
});

const newKey = (rest = `chat-${crypto.randomUUID().slice(0, 8)}`) => `agent:hook:${rest}`;

async function send(key: string, message: string, extra: Record<string, unknown> = {}) {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message, ...extra });
  expect(r.status).toBe(202);
  return r.json.runId as string;
}

const getRun = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json;

describe("webhook agent runtimes", () => {
  it("sync: the run is POSTed signed with its context and a run token; a 200 {reply} is the reply", async () => {
    respond = () => Response.json({ reply: "hello from outside", usage: { input: 7, output: 3 } });
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

    expect(received).toHaveLength(1);
    const { req, headers, raw } = received[0];
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
    respond = async (req) => {
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
    respond = () => Response.json({ reply: big });
    const key = newKey();
    const syncRun = await send(key, "sync please");
    const sync = (await call("GET", `/v1/runs/${syncRun}/wait?timeoutMs=10000`)).json;
    expect(sync.status).toBe("ok");
    expect(sync.reply).toBe(capText(big, MESSAGE_MAX_BYTES));
    expect(sync.reply.endsWith(truncationMarker(MESSAGE_MAX_BYTES))).toBe(true);

    respond = () => new Response(null, { status: 202 });
    const asyncRun = await send(key, "later please");
    await until(async () => expect(received).toHaveLength(2));
    const done = await call(
      "POST",
      `/v1/runs/${asyncRun}/complete`,
      { reply: big },
      { token: received[1].req.runToken },
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
    respond = () => new Response(null, { status: 202 });
    const key = newKey();
    const runId = await send(key, "take your time");
    await posted();
    const { runToken } = received[0].req;
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
    respond = () => Response.json({ reply: "next" });
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
      { token: received[0].req.runToken },
    );
    expect(r.json).toMatchObject({ status: "error", error: "runtime crashed" });
  });

  it("an awaiting run survives the loss of the object's memory: its lease does not retry it, completion still lands", async () => {
    const key = newKey();
    const runId = await send(key, "long job");
    await posted();
    await abortAllDurableObjects();
    // Past the lease: a lost built-in run would be re-queued and POSTed again here.
    await advance(key, LEASE_MS + 1_000);
    expect(await getRun(runId)).toMatchObject({ status: "running" });
    expect(received).toHaveLength(1);
    const r = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { reply: "after restart" },
      { token: received[0].req.runToken },
    );
    expect(r.json).toMatchObject({ status: "ok", reply: "after restart" });
  });

  it("a run retried after an eviction is POSTed again with the same webhook-id (the run id), freshly signed", async () => {
    let calls = 0;
    respond = () => (++calls === 1 ? new Promise<Response>(() => {}) : Response.json({ reply: "second try" }));
    const key = newKey();
    const runId = await send(key, "retry me");
    await posted();
    await abortAllDurableObjects();
    // The lease notices the lost executor and runs the same run again (attempt 2).
    await advance(key, LEASE_MS + 1_000);
    await until(async () => expect(received).toHaveLength(2));
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "ok",
      reply: "second try",
    });
    expect(received.map((r) => [r.req.attempt, r.headers.get("webhook-id"), r.headers.get("Idempotency-Key")])).toEqual(
      [
        [1, runId, runId],
        [2, runId, runId],
      ],
    );
    const verifier = new Webhook(new TextEncoder().encode(RUNTIME_SECRET), { format: "raw" });
    for (const { raw, headers, req } of received) {
      const standard = {
        "webhook-id": headers.get("webhook-id")!,
        "webhook-timestamp": headers.get("webhook-timestamp")!,
        "webhook-signature": headers.get("webhook-signature")!,
      };
      expect(verifier.verify(raw, standard)).toEqual(req);
    }
  });

  it("a runtime that never answers ends in timeout at the run's deadline, and its token is refused", async () => {
    const key = newKey();
    const runId = await send(key, "anyone there?");
    await posted();
    await advance(key, 121_000);
    const run = await getRun(runId);
    expect(run.status).toBe("timeout");
    expect(run.error).toMatch(/^Run timed out after \d+(\.\d)?s$/);
    const late = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { reply: "too late" },
      { token: received[0].req.runToken },
    );
    expect(late.status).toBe(401);
    expect(late.json.error.message).toBe(`Run token no longer valid: run ${runId} has ended (timeout)`);
  });

  it("expired and forged run tokens are refused", async () => {
    const key = newKey();
    const runId = await send(key, "tokens");
    await posted();
    const { runToken } = received[0].req;
    const claims = { runId, sessionKey: key, agentId: "hook", isSubagent: false };
    const expired = await mintRunToken(env.SIGNING_SECRET as string, { ...claims, expiresAt: Date.now() - 1 });
    const r1 = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token: expired },
    );
    expect(r1).toMatchObject({
      status: 401,
      json: {
        ok: false,
        error: { type: "unauthorized", message: `Run token expired: run ${runId} passed its deadline` },
      },
    });

    // Signed with another secret, or claims swapped under a genuine MAC: not a token at all.
    const wrongSecret = await mintRunToken("not-the-secret", { ...claims, expiresAt: Date.now() + 60_000 });
    const [prefix, , mac] = runToken.split(".");
    const swapped = `${prefix}.${btoa(JSON.stringify({ v: 1, ...claims, sessionKey: "agent:hook:main", expiresAt: Date.now() + 60_000 })).replace(/=+$/, "")}.${mac}`;
    for (const forged of [wrongSecret, swapped, `${runToken}x`]) {
      const r = await call(
        "POST",
        "/tools/invoke",
        { tool: "sessions_history", args: { sessionKey: "current" } },
        { token: forged },
      );
      expect(r).toMatchObject({
        status: 401,
        json: { ok: false, error: { type: "unauthorized", message: "Invalid bearer token" } },
      });
    }
    // The genuine token still works while the run runs.
    const ok = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token: runToken },
    );
    expect(ok.status).toBe(200);
    await call("POST", `/v1/runs/${runId}/complete`, { reply: "bye" }, { token: runToken });
  });

  it("a sub-agent run token gets the sub-agent tool set: sessions_spawn and the session tools are 404", async () => {
    const key = newKey(`subagent:${crypto.randomUUID()}`);
    const runId = await send(key, "child task");
    await posted();
    const { req } = received[0];
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
    expect(received).toHaveLength(0);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("deny");
  });

  it("runtime failures end the run error with a clear message", async () => {
    respond = () => new Response("boom", { status: 500 });
    const a = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${a}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered HTTP 500",
    });
    respond = () => new Response("not json", { status: 200 });
    const b = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${b}/wait?timeoutMs=10000`)).json.error).toMatch(
      /^webhook runtime answered 200 without a JSON body/,
    );
    respond = () => Response.json({ error: "model quota exceeded" });
    const c = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${c}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "model quota exceeded",
    });
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
    respond = () => Response.json({ reply: "ANNOUNCE_SKIP" });
    const target = newKey();
    const r = await call("POST", "/tools/invoke", {
      tool: "sessions_send",
      args: { sessionKey: target, message: "question from main", timeoutSeconds: 10 },
    });
    expect(r.status).toBe(200);
    expect(r.json.result.details).toMatchObject({ status: "ok", reply: "ANNOUNCE_SKIP" });
    const first = received[0].req;
    expect(first).toMatchObject({
      sessionKey: target,
      message: "question from main",
      provenance: { kind: "inter_session", sourceTool: "sessions_send" },
    });
    expect(first.extraSystemPrompt).toBeTruthy();
  });

  it("outbound safety: a redirect is a failure (never followed), a slow runtime times out, a huge answer is not buffered", async () => {
    let init: RequestInit | undefined;
    respond = (_req, i) => {
      init = i;
      return new Response(null, { status: 302, headers: { Location: "https://elsewhere.test/steal" } });
    };
    const redirected = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${redirected}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered HTTP 302 (redirects are not followed)",
    });
    expect(init?.redirect).toBe("manual");
    expect(received.filter((r) => r.req.runId === redirected)).toHaveLength(1);

    // Never answering: the request is cut at the run's deadline (at most 15 min), here shortened to 20 ms.
    const realTimeout = timeouts.signal.bind(timeouts);
    const asked: number[] = [];
    vi.spyOn(timeouts, "signal").mockImplementation((ms: number, parent?: AbortSignal) => {
      asked.push(ms);
      return realTimeout(20, parent);
    });
    respond = (_req, i) =>
      new Promise((_, reject) => i?.signal?.addEventListener("abort", () => reject(i.signal!.reason)));
    const slow = await send(newKey(), "x");
    const slowRun = (await call("GET", `/v1/runs/${slow}/wait?timeoutMs=10000`)).json;
    expect(slowRun.status).toBe("error");
    expect(slowRun.error).toMatch(
      /^webhook runtime did not answer within \d+ms \(answer 202 and complete later for long runs\)$/,
    );
    expect(asked.length).toBeGreaterThan(0);
    expect(Math.max(...asked)).toBeLessThanOrEqual(120_000); // the run's deadline (timeoutSeconds 120)
    vi.mocked(timeouts.signal).mockRestore();

    // An endless 200 body: reading stops at the cap.
    let pulled = 0;
    respond = () =>
      new Response(
        new ReadableStream({
          pull(ctrl) {
            pulled += 65_536;
            ctrl.enqueue(new Uint8Array(65_536).fill(32));
          },
        }),
        { status: 200 },
      );
    const huge = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${huge}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered more than 4194304 bytes",
    });
    expect(pulled).toBeLessThan(4_194_304 + 5 * 65_536);
  });
});

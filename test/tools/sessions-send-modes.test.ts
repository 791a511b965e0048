import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { A2A_ANNOUNCE_STEP_HEADER } from "../../src/send/control-tokens";
import {
  MAX_NOTIFICATION_BYTES,
  MAX_PENDING_NOTIFICATIONS,
  MAX_PENDING_STEERS,
  MAX_STEER_BYTES,
} from "../../src/send/send-inbox";
import { STEER_FOLLOWUP_NOTE } from "../../src/send/send-modes";
import {
  MISSING_TARGET,
  MODE_TEXT,
  NO_ACTIVE_RUN,
  NO_REPLY_TEXT,
  RESUME_UNSUPPORTED,
  STEERS_FULL,
} from "../../src/tools/sessions-send-modes";
import { type FakeCall, useFakeProvider } from "../helpers/fake-provider";
import { installFakeRuntime, newKey, send as post202, posted, runtime } from "../helpers/fake-runtime";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";

let n = 0;
const uniq = (base: string) => `agent:main:${base}-${++n}`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const REQUESTER = "agent:main:main";
const STEER_PREFIX = `[Inter-session message] sourceSession=${REQUESTER} sourceChannel=unknown sourceTool=sessions_send\n`;

/** The fake model holds each call for the test, except the agent-to-agent steps a followup's flow adds: skipped at once. */
function provider() {
  return useFakeProvider({
    extraConfig: { tools: { sessions: { visibility: "all" } }, session: { agentToAgent: { maxPingPongTurns: 0 } } },
    auto: (c) => {
      if (systemOf(c).includes(A2A_ANNOUNCE_STEP_HEADER)) c.reply("ANNOUNCE_SKIP");
    },
  });
}

async function post(key: string, message: string): Promise<string> {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message });
  expect(r.status).toBe(202);
  return r.json.runId as string;
}
const wait = async (runId: string) => (await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json;
const send = (args: Record<string, unknown>) => invoke("sessions_send", args, { sessionKey: REQUESTER });
const systemOf = (c: FakeCall) => String(c.body.messages.find((m: any) => m.role === "system")?.content ?? "");

/** The session's runs in queue order: kind, status and the message that started each. */
const runsOf = (key: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    s.storage.sql
      .exec<{ id: string; kind: string; status: string; input_json: string }>(
        "SELECT id, kind, status, input_json FROM runs ORDER BY qseq",
      )
      .toArray()
      .map((r) => ({ id: r.id, kind: r.kind, status: r.status, message: JSON.parse(r.input_json).message })),
  );
/** role:text of every transcript row, tool rows included. */
const transcript = async (key: string) =>
  ((await call("GET", `/v1/sessions/${enc(key)}/history?includeTools=true&limit=100`)).json.messages as any[]).map(
    (m) => `${m.role}:${m.content?.find?.((b: any) => b.type === "text")?.text ?? m.content?.[0]?.name ?? ""}`,
  );

/** A target whose first run holds its first model call open. */
async function runningTarget(fake: ReturnType<typeof provider>, base: string) {
  const key = uniq(base);
  const runId = await post(key, "work on it");
  await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
  return { key, runId };
}

describe("sessions_send mode: parameter", () => {
  it("resume is refused as unsupported, another value names the modes (400); nothing is sent", async () => {
    setConfigOverride({ tools: { sessions: { visibility: "all" } } });
    const resume = await send({ sessionKey: "main", message: "x", mode: "resume" });
    expect(resume.status).toBe(400);
    expect(resume.body).toEqual({ ok: false, error: { type: "invalid_request", message: RESUME_UNSUPPORTED } });
    for (const mode of ["STEER", "wake", 3]) {
      const bad = await send({ sessionKey: "main", message: "x", mode });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toBe(MODE_TEXT);
    }
    expect(MODE_TEXT).toBe("mode must be notify, steer, or followup");
  });

  it("a missing message is read from OpenClaw's aliases SendMessage, content, text; an alias beside message is unknown", async () => {
    const fake = provider();
    const key = uniq("aliases");
    const first = await post(key, "hello");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("hi");
    await wait(first);
    for (const alias of ["SendMessage", "content", "text"])
      expect((await send({ sessionKey: key, [alias]: `via ${alias}`, mode: "notify" })).details.status).toBe("queued");
    const both = await send({ sessionKey: key, message: "m", text: "t", mode: "notify" });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toBe("text: unknown parameter for sessions_send");
    const none = await send({ sessionKey: key, text: "   ", mode: "notify" });
    expect(none.body.error.message).toBe("message required");
    const next = await post(key, "go");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    for (const alias of ["SendMessage", "content", "text"]) expect(systemOf(fake.calls[1])).toContain(`via ${alias}`);
    fake.pending()[0].reply("ok");
    await wait(next);
  });
});

describe("sessions_send mode=steer", () => {
  it("reaches the running run's model at its next step, returns at once, and history shows it between the steps", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-next-step");
    const r = await send({ sessionKey: key, message: "use plan B", mode: "steer", timeoutSeconds: 30 });
    // Never waits: answered while the target's model call is still held open.
    expect(r.details).toEqual({
      runId: expect.stringMatching(UUID),
      status: "accepted",
      sessionKey: key,
      targetDisposition: "steered",
      delivery: { status: "skipped", mode: "announce" },
    });
    expect(r.details.runId).not.toBe(runId);
    expect(fake.pending()).toHaveLength(1);

    fake.pending()[0].toolCall("agents_list", {});
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.calls[0].lastUser).toBe("work on it");
    expect(fake.calls[1].lastUser).toBe(`${STEER_PREFIX}use plan B`);
    fake.pending()[0].reply("done with plan B");
    expect(await wait(runId)).toMatchObject({ status: "ok", reply: "done with plan B" });

    expect(await transcript(key)).toEqual([
      "user:work on it",
      "assistant:agents_list",
      `toolResult:${(await transcript(key))[2].slice("toolResult:".length)}`,
      "user:use plan B",
      "assistant:done with plan B",
    ]);
    const hist = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json.messages;
    expect(hist.find((m: any) => m.role === "user" && m.content[0].text === "use plan B")).toMatchObject({
      role: "user",
      provenance: { kind: "inter_session", sourceSessionKey: REQUESTER, sourceTool: "sessions_send" },
    });
    // Read at the step: no follow-up turn.
    expect((await runsOf(key)).map((x) => x.kind)).toEqual(["inbound"]);
  });

  it("survives an eviction between its acceptance and the next step: the retried run reads it once", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-evicted");
    expect((await send({ sessionKey: key, message: "mind the budget", mode: "steer" })).details.status).toBe(
      "accepted",
    );
    await crash(sessionStub(key));
    fake.abandonPending();
    await advance(key, 60_000);
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    // The retry's first step is the steer's next step.
    expect(fake.calls[1].lastUser).toBe(`${STEER_PREFIX}mind the budget`);
    fake.pending()[0].reply("within budget");
    expect(await wait(runId)).toMatchObject({ status: "ok", reply: "within budget" });
    expect(await transcript(key)).toEqual(["user:work on it", "user:mind the budget", "assistant:within budget"]);
    expect((await runsOf(key)).map((x) => x.kind)).toEqual(["inbound"]);
  });

  it("left unread when the run ends, it becomes one follow-up turn of its own, and nothing is repeated", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-leftover");
    await send({ sessionKey: key, message: "also check the logs", mode: "steer", idempotencyKey: "k1" });
    // The model answers without another step: the run ends before reading the steer.
    fake.pending()[0].reply("finished");
    expect(await wait(runId)).toMatchObject({ status: "ok", reply: "finished" });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.calls[1].lastUser).toBe(`${STEER_PREFIX}also check the logs`);
    expect(systemOf(fake.calls[1])).toContain(STEER_FOLLOWUP_NOTE);
    fake.pending()[0].reply("logs checked");
    const runs = await runsOf(key);
    expect(runs.map((x) => [x.kind, x.message])).toEqual([
      ["inbound", "work on it"],
      ["send", "also check the logs"],
    ]);
    expect(await wait(runs[1].id)).toMatchObject({ status: "ok", reply: "logs checked" });
    // The timer ran once more (a repeated firing): the same follow-up run, no second one.
    await advance(key, 0);
    expect(await runsOf(key)).toHaveLength(2);
    expect(await transcript(key)).toEqual([
      "user:work on it",
      "assistant:finished",
      "user:also check the logs",
      "assistant:logs checked",
    ]);
  });

  it("a run aborted before reading it: the steer still becomes its own turn", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-aborted");
    await send({ sessionKey: key, message: "stop and summarise", mode: "steer" });
    expect((await call("POST", `/v1/runs/${runId}/abort`)).json).toMatchObject({ status: "aborted" });
    await vi.waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1].lastUser).toBe(`${STEER_PREFIX}stop and summarise`);
    fake.calls[1].reply("summary");
    const runs = await runsOf(key);
    expect(runs.map((x) => [x.kind, x.message])).toEqual([
      ["inbound", "work on it"],
      ["send", "stop and summarise"],
    ]);
    expect(await wait(runs[1].id)).toMatchObject({ status: "ok", reply: "summary" });
  });

  it("the same idempotencyKey returns the same receipt and stores one steer", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-idem");
    const a = await send({ sessionKey: key, message: "once", mode: "steer", idempotencyKey: "same" });
    const b = await send({ sessionKey: key, message: "once", mode: "steer", idempotencyKey: "same" });
    expect(b.details).toEqual(a.details);
    fake.pending()[0].toolCall("agents_list", {});
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("ok");
    await wait(runId);
    expect((await transcript(key)).filter((t) => t === "user:once")).toHaveLength(1);
  });

  it(`refusals: a missing target, an idle one, more than ${MAX_PENDING_STEERS} unread steers, a send policy`, async () => {
    const fake = provider();
    const missing = uniq("steer-missing");
    expect((await send({ sessionKey: missing, message: "x", mode: "steer" })).details).toEqual({
      runId: expect.stringMatching(UUID),
      status: "error",
      error: MISSING_TARGET,
      sessionKey: missing,
    });
    expect(MISSING_TARGET).toBe(
      "Cannot notify, steer, or resume a missing session. Use mode=followup to start a new turn.",
    );
    // Asking created nothing.
    expect(await sessionStub(missing).getMeta()).toBeNull();

    const { key, runId } = await runningTarget(fake, "steer-refusals");
    for (let i = 0; i < MAX_PENDING_STEERS; i++)
      expect((await send({ sessionKey: key, message: `s${i}`, mode: "steer" })).details.status).toBe("accepted");
    expect((await send({ sessionKey: key, message: "one more", mode: "steer" })).details).toMatchObject({
      status: "error",
      error: STEERS_FULL,
    });
    fake.pending()[0].toolCall("agents_list", {});
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    // All twenty joined the one step, in order.
    const users = fake.calls[1].body.messages.filter((m: any) => m.role === "user").map((m: any) => m.content);
    expect(users.slice(1)).toEqual(Array.from({ length: MAX_PENDING_STEERS }, (_, i) => `${STEER_PREFIX}s${i}`));
    fake.pending()[0].reply("ok");
    await wait(runId);

    const idle = await send({ sessionKey: key, message: "x", mode: "steer" });
    expect(idle.details).toEqual({
      runId: expect.stringMatching(UUID),
      status: "error",
      error: NO_ACTIVE_RUN,
      sessionKey: key,
    });
    expect(NO_ACTIVE_RUN).toBe(
      "Target has no active run that accepts steering. Use mode=followup to start a new turn.",
    );

    await call("PATCH", `/v1/sessions/${enc(key)}`, { sendPolicy: "deny" });
    for (const mode of ["steer", "notify"])
      expect((await send({ sessionKey: key, message: "x", mode })).details).toMatchObject({
        status: "error",
        error: "send blocked by session policy",
      });
  });

  it("visibility applies as to every send: a sibling under tree is forbidden, nothing stored", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-tree");
    setConfigOverride({
      agents: { list: [{ id: "main", default: true, model: "fake/m1" }] },
      models: { providers: { fake: { baseUrl: "https://llm.test/v1", apiKey: "k", models: [{ id: "m1" }] } } },
      tools: { sessions: { visibility: "tree" } },
    });
    for (const mode of ["steer", "notify"])
      expect((await send({ sessionKey: key, message: "x", mode })).details).toMatchObject({
        status: "forbidden",
        error: "Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
        sessionKey: key,
      });
    const stored = await runInDurableObject(
      sessionStub(key),
      (_o, s) => s.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM send_inbox").one().n,
    );
    expect(stored).toBe(0);
    fake.pending()[0].reply("ok");
    await wait(runId);
  });
});

describe("sessions_send mode=followup", () => {
  it("queues a turn behind the running run (never steers it); results accepted, ok, no_reply", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "followup");
    const r = await send({ sessionKey: key, message: "next task", mode: "followup", timeoutSeconds: 0 });
    expect(r.details).toEqual({
      runId: expect.any(String),
      status: "accepted",
      sessionKey: key,
      targetDisposition: "queued",
      delivery: { status: "skipped", mode: "announce" },
    });
    // The running run's next step does not see it.
    fake.pending()[0].toolCall("agents_list", {});
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.calls[1].lastUser).not.toContain("next task");
    fake.pending()[0].reply("first done");
    await wait(runId);
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.calls[2].lastUser).toBe(`${STEER_PREFIX}next task`);
    fake.pending()[0].reply("NO_REPLY");
    expect(await wait(r.details.runId)).toMatchObject({ status: "ok" });
    expect((await runsOf(key)).map((x) => x.message)).toEqual(["work on it", "next task"]);

    // Waited: the reply, or no_reply when the turn had nothing to say.
    const replying = send({ sessionKey: key, message: "say hi", mode: "followup", timeoutSeconds: 10 });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("hi");
    expect((await replying).details).toEqual({
      runId: expect.any(String),
      status: "ok",
      sessionKey: key,
      delivery: { status: "skipped", mode: "announce" },
      reply: "hi",
    });
    const silent = send({ sessionKey: key, message: "say nothing", mode: "followup", timeoutSeconds: 10 });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("NO_REPLY");
    expect((await silent).details).toEqual({
      runId: expect.any(String),
      status: "no_reply",
      sessionKey: key,
      message: NO_REPLY_TEXT,
    });
    // A wait that ends while the run goes on is `accepted` (not the classic `timeout`).
    const slow = send({ sessionKey: key, message: "slow", mode: "followup", timeoutSeconds: 1 });
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect((await slow).details).toMatchObject({ status: "accepted", targetDisposition: "queued" });
    fake.pending()[0].reply("late");
    await vi.waitFor(async () => expect((await runsOf(key)).every((x) => x.status === "ok")).toBe(true));
  });
});

describe("sessions_send mode=notify", () => {
  it("stores context for the next turn without starting one; that turn alone sees it, after an eviction too", async () => {
    const fake = provider();
    const key = uniq("notify");
    const first = await post(key, "hello");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("hi");
    await wait(first);

    const r = await send({ sessionKey: key, message: "the deploy finished", mode: "notify", timeoutSeconds: 30 });
    expect(r.details).toEqual({
      status: "queued",
      sessionKey: key,
      notificationId: expect.stringMatching(UUID),
      durability: "durable",
      runStarted: false,
    });
    expect(await runsOf(key)).toHaveLength(1);
    await evict(sessionStub(key));

    const next = await post(key, "status?");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(systemOf(fake.calls[1])).toContain(`from session ${REQUESTER}: the deploy finished`);
    fake.pending()[0].reply("deployed");
    await wait(next);
    const later = await post(key, "anything else?");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(systemOf(fake.calls[2])).not.toContain("the deploy finished");
    fake.pending()[0].reply("no");
    await wait(later);
  });

  it("the turn that took them is retried after a crash: the retry sees the same notifications, no later turn does", async () => {
    const fake = provider();
    const key = uniq("notify-retry");
    const first = await post(key, "hello");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("hi");
    await wait(first);
    await send({ sessionKey: key, message: "cache flushed", mode: "notify" });
    const next = await post(key, "status?");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(systemOf(fake.calls[1])).toContain("cache flushed");
    // The executor is lost mid-call; the lease re-queues the run and its retry takes the same notification.
    await crash(sessionStub(key));
    fake.abandonPending();
    await advance(key, 60_000);
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(fake.calls[2].lastUser).toBe("status?");
    expect(systemOf(fake.calls[2])).toContain("cache flushed");
    fake.pending()[0].reply("flushed");
    expect(await wait(next)).toMatchObject({ status: "ok" });
    const later = await post(key, "more?");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    expect(systemOf(fake.calls[3])).not.toContain("cache flushed");
    fake.pending()[0].reply("no");
    await wait(later);
  });

  it(`keeps at most ${MAX_PENDING_NOTIFICATIONS}: the oldest are evicted; a missing target is refused`, async () => {
    const fake = provider();
    const key = uniq("notify-cap");
    const first = await post(key, "hello");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("hi");
    await wait(first);
    for (let i = 1; i <= MAX_PENDING_NOTIFICATIONS + 2; i++)
      expect((await send({ sessionKey: key, message: `note ${i};`, mode: "notify" })).details.status).toBe("queued");
    const next = await post(key, "go");
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const system = systemOf(fake.calls[1]);
    const seen = [...system.matchAll(/note (\d+);/g)].map((m) => Number(m[1]));
    expect(seen).toEqual(Array.from({ length: MAX_PENDING_NOTIFICATIONS }, (_, i) => i + 3));
    fake.pending()[0].reply("ok");
    await wait(next);

    const missing = uniq("notify-missing");
    expect((await send({ sessionKey: missing, message: "x", mode: "notify" })).details).toMatchObject({
      status: "error",
      error: MISSING_TARGET,
    });
    expect(await sessionStub(missing).getMeta()).toBeNull();
  });
});

describe("sessions_send modes: limits and webhook runtimes", () => {
  it("a steer over 64 KiB or a notification over 16 KiB is a 413 naming message; nothing stored", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "mode-sizes");
    const steer = await send({ sessionKey: key, message: "s".repeat(MAX_STEER_BYTES + 1), mode: "steer" });
    expect(steer.status).toBe(413);
    expect(steer.body.error.message).toBe(
      `message: ${MAX_STEER_BYTES + 1} bytes exceeds the limit of ${MAX_STEER_BYTES} bytes for mode=steer (see docs/limits.md)`,
    );
    const note = await send({ sessionKey: key, message: "n".repeat(MAX_NOTIFICATION_BYTES + 1), mode: "notify" });
    expect(note.status).toBe(413);
    expect(note.body.error.message).toMatch(/^message: .* for mode=notify/);
    const stored = await runInDurableObject(
      sessionStub(key),
      (_o, s) => s.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM send_inbox").one().n,
    );
    expect(stored).toBe(0);
    fake.pending()[0].reply("ok");
    await wait(runId);
  });

  it("a webhook runtime's running run refuses steering; its next run gets the notifications in extraSystemPrompt", async () => {
    installFakeRuntime();
    setConfigOverride({
      agents: {
        defaults: { timeoutSeconds: 120 },
        entries: {
          main: { default: true },
          hook: { runtime: { type: "webhook", url: "https://runtime.test/agent", secret: "runtime-secret" } },
        },
      },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    const key = newKey();
    const first = await post202(key, "long job");
    await posted();
    expect((await send({ sessionKey: key, message: "faster", mode: "steer" })).details).toMatchObject({
      status: "error",
      error: NO_ACTIVE_RUN,
    });
    expect((await send({ sessionKey: key, message: "the build is green", mode: "notify" })).details.status).toBe(
      "queued",
    );
    const second = await post202(key, "next");
    const { runToken } = runtime.received[0].req;
    expect((await call("POST", `/v1/runs/${first}/complete`, { reply: "done" }, { token: runToken })).status).toBe(200);
    await posted(2);
    expect(runtime.received[1].req.runId).toBe(second);
    expect(runtime.received[1].req.extraSystemPrompt).toContain(`from session ${REQUESTER}: the build is green`);
    expect(runtime.received[0].req.extraSystemPrompt ?? "").not.toContain("the build is green");
    const token2 = runtime.received[1].req.runToken;
    await call("POST", `/v1/runs/${second}/complete`, { reply: "ok" }, { token: token2 });
  });
});

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { MAX_PENDING_STEERS } from "../../src/send/send-inbox";
import { STEER_FOLLOWUP_NOTE } from "../../src/send/send-modes";
import {
  MISSING_TARGET,
  MODE_TEXT,
  NO_ACTIVE_RUN,
  RESUME_UNSUPPORTED,
  STEERS_FULL,
} from "../../src/tools/sessions-send-modes";
import { advance, call, enc, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import {
  post,
  provider,
  REQUESTER,
  runningTarget,
  runsOf,
  STEER_PREFIX,
  send,
  systemOf,
  transcript,
  UUID,
  uniq,
  wait,
} from "../helpers/send-modes";

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

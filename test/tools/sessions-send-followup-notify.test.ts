import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { MAX_NOTIFICATION_BYTES, MAX_PENDING_NOTIFICATIONS, MAX_STEER_BYTES } from "../../src/send/send-inbox";
import { MISSING_TARGET, NO_ACTIVE_RUN, NO_REPLY_TEXT } from "../../src/tools/sessions-send-modes";
import { installFakeRuntime, newKey, send as post202, posted, runtime } from "../helpers/fake-runtime";
import { advance, call, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import {
  post,
  provider,
  REQUESTER,
  runningTarget,
  runsOf,
  STEER_PREFIX,
  send,
  systemOf,
  UUID,
  uniq,
  wait,
} from "../helpers/send-modes";

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

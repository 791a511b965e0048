import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { sessionExtensions } from "../../src/extensions";
import { SessionObject } from "../../src/session/session-object";
import {
  DEFAULT_TIMER_POLICY,
  MAX_DEAD_TIMERS,
  recordTimerFailure,
  retryDelayMs,
} from "../../src/session/timer-policy";
import { REQUESTER_EXTENSION } from "../../src/spawn/requester-side";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { baseConfig, flowsOf, installFakes as installScripted, until } from "../helpers/scripted";
import {
  announcesIn,
  childState,
  installFakes as installSubagentFakes,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

const FAR = 24 * 60 * 60_000;
const timerPolicy = (kind: string) => sessionExtensions.timerKinds.policy(kind);

/** The structured `timer_dead` log lines written so far. */
function deadLogLines(spy: { mock: { calls: unknown[][] } }): any[] {
  return spy.mock.calls
    .map((c) => (typeof c[0] === "string" && c[0].startsWith("{") ? JSON.parse(c[0]) : null))
    .filter((l) => l?.event === "timer_dead");
}

async function timerRow(key: string, kind: string, ref: string) {
  return runInDurableObject(
    sessionStub(key),
    async (_o, state) =>
      state.storage.sql.exec<any>("SELECT * FROM timers WHERE kind = ? AND ref = ?", kind, ref).toArray()[0] ?? null,
  );
}

describe("timer policy", () => {
  it("backoff doubles from the base up to the cap, with at most half of it random", () => {
    const p = { maxAttempts: 8, baseDelayMs: 2_000, maxDelayMs: 60_000 };
    expect([1, 2, 3, 6, 7, 20].map((f) => retryDelayMs(p, f, () => 1))).toEqual([
      2_000, 4_000, 8_000, 60_000, 60_000, 60_000,
    ]);
    expect([1, 2, 3, 6].map((f) => retryDelayMs(p, f, () => 0))).toEqual([1_000, 2_000, 4_000, 30_000]);
    expect(timerPolicy("a2a").maxAttempts).toBe(6);
    expect(timerPolicy("subagent-handoff")).toEqual({ maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 600_000 });
    expect(timerPolicy("index")).toEqual(DEFAULT_TIMER_POLICY);
  });
});

describe("dead timers", () => {
  it("an agent-to-agent step that always fails ends the flow with its error after 6 attempts, listed over /v1, logged once, never retried again", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 2 } } }));
    const fakes = installScripted((r) => (r.kind === "primary" ? "initial" : "pong"));
    const requester = `agent:main:discord:group:dead-req-${crypto.randomUUID().slice(0, 8)}`;
    const target = `agent:main:discord:group:dead-tgt-${crypto.randomUUID().slice(0, 8)}`;
    const realEnqueue = SessionObject.prototype.enqueue;
    let refused = 0;
    // The requester's object refuses every reply-back turn (think: its storage keeps failing).
    vi.spyOn(SessionObject.prototype, "enqueue").mockImplementation(function (this: SessionObject, req, also) {
      if (req.input.kind === "a2a_turn" && this.key === requester) {
        refused++;
        return Promise.reject(new Error("requester storage unavailable"));
      }
      return realEnqueue.call(this, req, also);
    });
    const logs = vi.spyOn(console, "error");
    const sent = await invoke(
      "sessions_send",
      { sessionKey: target, message: "ping", timeoutSeconds: 10 },
      { sessionKey: requester },
    );
    expect(sent.details.status).toBe("ok");
    // The first dispatch runs right after the primary run ended (it counts only when the alarm made it).
    await until(async () => expect(refused).toBeGreaterThan(0));
    const [flow0] = await flowsOf(target);
    const seen: number[] = [];
    for (let pass = 0; pass < 10; pass++) {
      const timer = await timerRow(target, "a2a", flow0.id);
      if (!timer) break;
      // While the timer lives the flow waits on its turn, with the last error recorded on the timer.
      expect((await flowsOf(target))[0].step).toBe("turn");
      if (timer.attempts > 0) expect(timer.last_error).toBe("requester storage unavailable");
      seen.push(timer.attempts);
      await advance(target, FAR);
    }
    // Failures 1..5 were retried; the sixth was the last: the timer is gone.
    expect(seen.filter((a) => a > 0)).toEqual([1, 2, 3, 4, 5]);
    const refusedAtDeath = refused;
    expect(refusedAtDeath).toBeGreaterThanOrEqual(6);
    const [flow] = await flowsOf(target);
    expect(flow).toMatchObject({
      step: "done",
      outcome: "failed",
      error: "The reply-back turn 1 gave up after 6 attempts: requester storage unavailable",
    });
    expect(flow.deliveryId).toBeUndefined();

    const listed = await call("GET", `/v1/sessions/${enc(target)}/timers/dead`);
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual({
      sessionKey: target,
      count: 1,
      timers: [
        {
          kind: "a2a",
          ref: flow.id,
          attempts: 6,
          lastError: "requester storage unavailable",
          firstFailedAt: expect.any(Number),
          diedAt: expect.any(Number),
          retryable: false,
        },
      ],
    });
    expect(listed.json.timers[0].firstFailedAt).toBeLessThan(listed.json.timers[0].diedAt);
    expect(deadLogLines(logs)).toEqual([
      {
        level: "error",
        event: "timer_dead",
        sessionKey: target,
        kind: "a2a",
        ref: flow.id,
        attempts: 6,
        lastError: "requester storage unavailable",
        firstFailedAt: expect.any(Number),
        diedAt: expect.any(Number),
      },
    ]);
    // Its death ended the flow, so an operator retry is refused rather than reviving a finished flow.
    const retry = await call("POST", `/v1/sessions/${enc(target)}/timers/dead/a2a/${flow.id}/retry`);
    expect(retry.status).toBe(409);
    expect(retry.json.error.type).toBe("conflict");
    // Nothing is left to retry: further alarms make no attempt, and no model ran for the refused turns.
    await advance(target, FAR);
    await advance(target, FAR);
    expect(refused).toBe(refusedAtDeath);
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary"]);
  });

  it("a sub-agent's announce hand-off that keeps failing leaves its flow failed after 10 attempts; an operator retry delivers it", async () => {
    setConfigOverride(subagentConfig());
    installSubagentFakes((c) => (c.step === "task" ? "the answer" : c.step === "announce" ? "" : "hi"));
    const req = requesterKey("dead-handoff");
    await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
    const realCall = SessionObject.prototype.extensionCall;
    let refused = 0;
    let refuse = true;
    vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
      this: SessionObject,
      name,
      method,
      arg,
    ) {
      if (refuse && this.key === req && name === REQUESTER_EXTENSION && method === "receiveAnnounce") {
        refused++;
        return Promise.reject(new Error("requester unreachable"));
      }
      return realCall.call(this, name, method, arg);
    });
    const r = await invoke("sessions_spawn", { task: "find it" }, { sessionKey: req });
    const child: string = r.details.childSessionKey;
    const stub = sessionStub(child);
    // Task run, then the announce step: wait for each server-side and let the alarm move the flow on.
    await stub.waitRun(r.details.runId, 10_000);
    for (let i = 0; i < 5 && !(await childState(child)).flows.some((f) => f.state === "handoff"); i++) {
      for (const id of (await childState(child)).pendingRuns) await stub.waitRun(id, 10_000);
      await runDurableObjectAlarm(stub);
    }
    const taskRunId: string = r.details.runId;
    for (let pass = 0; pass < 12 && (await timerRow(child, "subagent-handoff", taskRunId)); pass++)
      await advance(child, FAR);
    expect((await childState(child)).flows).toEqual([{ id: `announce:${taskRunId}`, state: "failed" }]);
    const dead = await call("GET", `/v1/sessions/${enc(child)}/timers/dead`);
    expect(dead.json.timers).toEqual([
      {
        kind: "subagent-handoff",
        ref: taskRunId,
        attempts: 10,
        lastError: "requester unreachable",
        firstFailedAt: expect.any(Number),
        diedAt: expect.any(Number),
        retryable: true,
      },
    ]);
    // Every attempt was made by the alarm, and each one reached the requester and was refused.
    expect(refused).toBe(10);
    expect(await announcesIn(req, child)).toEqual([]);

    // The requester is back: the operator re-queues the hand-off and the announce arrives, once.
    refuse = false;
    const retried = await call("POST", `/v1/sessions/${enc(child)}/timers/dead/subagent-handoff/${taskRunId}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.json).toMatchObject({ kind: "subagent-handoff", ref: taskRunId, retried: true });
    await runDurableObjectAlarm(stub);
    await until(async () =>
      expect((await announcesIn(req, child)).map((a) => a.text.split("\n")[0])).toEqual([
        "Status: completed successfully",
      ]),
    );
    expect((await call("GET", `/v1/sessions/${enc(child)}/timers/dead`)).json.count).toBe(0);
  });

  it("a yield batch whose resume turn can never be queued dies after 8 attempts: each child's announce is told directly", async () => {
    setConfigOverride(subagentConfig());
    installSubagentFakes((c) => {
      if (c.step === "task") return "the part";
      if (c.step === "announce") return "notes";
      if (c.lastUser !== "go") return "hi";
      return c.toolResults === 0
        ? { toolCall: { name: "sessions_spawn", args: { task: "p", label: "p" } } }
        : { toolCall: { name: "sessions_yield", args: {} } };
    });
    const realEnqueue = SessionObject.prototype.enqueue;
    vi.spyOn(SessionObject.prototype, "enqueue").mockImplementation(function (this: SessionObject, req, also) {
      if (req.input.data?.yieldBatch) return Promise.reject(new Error("queue unavailable"));
      return realEnqueue.call(this, req, also);
    });
    const req = requesterKey("dead-yield");
    const run = await sendAndWait(req, "go", { channel: "webchat", to: "alice" });
    const child = (await childState(req)).flows.find((f) => f.id.startsWith("child:"))!.id.slice("child:".length);
    await settle(child);
    const batch = `yield:${run.runId}`;
    for (let pass = 0; pass < 10 && (await timerRow(req, "subagent-yield", batch)); pass++) await advance(req, FAR);
    expect((await childState(req)).flows.find((f) => f.id === batch)?.state).toBe("failed");
    const dead = (await call("GET", `/v1/sessions/${enc(req)}/timers/dead`)).json.timers;
    expect(dead).toEqual([
      expect.objectContaining({ kind: "subagent-yield", ref: batch, attempts: 8, retryable: false }),
    ]);
    expect((await announcesIn(req, child)).map((a) => a.text.split("\n")[0])).toEqual([
      "Status: completed successfully",
    ]);
    expect((await childState(req)).runs.filter((r) => r.kind === "subagent_completion")).toEqual([]);
  });

  it("dead timers are bounded per session: the oldest are dropped past the cap", async () => {
    const key = `agent:main:dead-cap-${crypto.randomUUID().slice(0, 8)}`;
    await sessionStub(key).ensureSession();
    await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      for (let i = 0; i < MAX_DEAD_TIMERS + 5; i++) {
        obj.timers.set("index", `r${i}`, FAR * 1000);
        obj.sql.exec(
          "UPDATE timers SET attempts = ? WHERE kind = 'index' AND ref = ?",
          DEFAULT_TIMER_POLICY.maxAttempts - 1,
          `r${i}`,
        );
        expect(recordTimerFailure(obj, obj.timers.get("index", `r${i}`)!, new Error(`boom ${i}`))).toBe("dead");
      }
    });
    const listed = await call("GET", `/v1/sessions/${enc(key)}/timers/dead?limit=100`);
    expect(listed.json.count).toBe(MAX_DEAD_TIMERS);
    expect(listed.json.timers[0]).toMatchObject({
      kind: "index",
      ref: `r${MAX_DEAD_TIMERS + 4}`,
      lastError: `boom ${MAX_DEAD_TIMERS + 4}`,
      retryable: true,
    });
    const refs = new Set(listed.json.timers.map((t: any) => t.ref));
    expect([0, 1, 2, 3, 4].some((i) => refs.has(`r${i}`))).toBe(false);
    expect((await call("GET", `/v1/sessions/${enc(key)}/timers/dead?limit=0`)).status).toBe(400);
    expect((await call("POST", `/v1/sessions/${enc(key)}/timers/dead/index/nope/retry`)).status).toBe(404);
  });
});

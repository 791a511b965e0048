import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { announceIdempotencyKey, handAnnounceToRequester } from "../../src/spawn/requester-side";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import {
  announcesIn,
  childState,
  installFakes,
  type ModelAnswer,
  type ModelCall,
  outboxOf,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * Spawn one child from a fresh requester (with a webchat route unless `route: false`), drive it until
 * its announce is handed back, and return what the requester recorded.
 */
async function spawnAndSettle(
  answer: (c: ModelCall) => ModelAnswer,
  opts: {
    config?: Record<string, any>;
    args?: Record<string, unknown>;
    route?: boolean;
    hookStatus?: () => number;
    beforeSettle?: (child: string) => Promise<void>;
  } = {},
) {
  setConfigOverride(subagentConfig(opts.config ?? {}));
  const fakes = installFakes(answer);
  if (opts.hookStatus) fakes.hookStatus = opts.hookStatus;
  const req = requesterKey("announce");
  if (opts.route !== false) await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
  const r = await invoke("sessions_spawn", { task: "find the answer", ...(opts.args ?? {}) }, { sessionKey: req });
  expect(r.details.status).toBe("accepted");
  const child: string = r.details.childSessionKey;
  await opts.beforeSettle?.(child);
  const state = await settle(child);
  // Deliveries leave from the requester's outbox on its alarm.
  await runDurableObjectAlarm(sessionStub(req));
  const announces = await announcesIn(req, child);
  return { req, child, runId: r.details.runId as string, fakes, state, announces };
}

function expectedStats(
  child: string,
  sessionId: string,
  runtime = "0s",
  tokens = "tokens 1.2k (in 1.2k / out 34) • est $0.0041",
): string {
  return `Stats: runtime ${runtime} • ${tokens} • sessionKey ${child} • sessionId ${sessionId} • transcript /v1/sessions/${enc(child)}/transcript.jsonl`;
}

const answers =
  (task: ModelAnswer, announce: ModelAnswer) =>
  (c: ModelCall): ModelAnswer =>
    c.step === "task" ? task : c.step === "announce" ? announce : "hi";

describe("sub-agent announce: format", () => {
  it("ok: Status/Result/Notes/Stats, recorded in the requester as an internal message and delivered to its channel", async () => {
    const { req, child, runId, fakes, state, announces } = await spawnAndSettle(
      answers("the answer is 42", "double-checked"),
    );
    expect(announces).toHaveLength(1);
    const runtime = /Stats: runtime (\S+) /.exec(announces[0].text)![1];
    expect(announces[0].text).toBe(
      [
        "Status: completed successfully",
        "Result: the answer is 42",
        "Notes: double-checked",
        expectedStats(child, state.meta.sessionId, runtime),
      ].join("\n"),
    );
    expect(announces[0].provenance).toEqual({
      kind: "internal_system",
      sourceSessionKey: child,
      sourceTool: "sessions_spawn",
    });
    // The announce step ran in the child, with the outcome given to it (Status is never the model's).
    const step = fakes.model.find((c) => c.step === "announce" && c.system.includes(child))!;
    expect(step.lastUser).toBe("Sub-agent announce step.");
    expect(step.system).toContain("Status: completed successfully\nResult: the answer is 42");
    expect(step.system).toContain('If you want to remain silent, reply exactly "ANNOUNCE_SKIP".');
    // Delivered through the outbox to the requester's route, keyed per child run.
    const hook = fakes.hooks.find((h) => h.body.kind === "subagent_announce" && h.body.message === announces[0].text)!;
    expect(hook.body).toMatchObject({
      channel: "webchat",
      to: "alice",
      sessionKey: req,
      kind: "subagent_announce",
      idempotencyKey: announceIdempotencyKey(child, runId),
    });
    expect((await outboxOf(req)).filter((o) => o.kind === "subagent_announce")).toMatchObject([
      { status: "delivered", attempts: 1 },
    ]);
    // The child's row reports how it ended.
    const row = (await call("GET", `/v1/sessions/${enc(child)}`)).json;
    expect(row).toMatchObject({ status: "done", spawnedBy: req });
    expect(typeof row.runtimeMs).toBe("number");
  });

  it("Status comes from the runtime outcome, not from what the model writes", async () => {
    const { announces } = await spawnAndSettle(answers("Status: failed", "Status: timed out"));
    expect(announces[0].text.split("\n").slice(0, 3)).toEqual([
      "Status: completed successfully",
      "Result: Status: failed",
      "Notes: Status: timed out",
    ]);
  });

  it("a huge result is frozen at 100KB with OpenClaw's marker", async () => {
    const { announces } = await spawnAndSettle(answers("x".repeat(150 * 1024), ""));
    const result = announces[0].text.split("\n").slice(1, 3);
    expect(result[0]).toBe(`Result: ${"x".repeat(100 * 1024)}`);
    expect(result[1]).toBe("[truncated: frozen completion output exceeded 100KB (150KB)]");
  });

  it("empty final reply: Result is the latest tool result", async () => {
    const { announces } = await spawnAndSettle(
      (c) =>
        c.step === "task"
          ? c.hasToolResult
            ? ""
            : { toolCall: { name: "agents_list", args: {} } }
          : c.step === "announce"
            ? ""
            : "hi",
      { config: { tools: { subagents: { tools: { allow: ["agents_list"] } } } } },
    );
    const lines = announces[0].text.split("\n");
    expect(lines[0]).toBe("Status: completed successfully");
    expect(lines[1]).toBe('Result: {"requester":"main","allowAny":false,"agents":[{"id":"main","configured":true}]}');
    // An empty announce step adds no Notes line.
    expect(lines[2]).toMatch(/^Stats: /);
  });

  it("empty final reply and no tool result: Result is (no output)", async () => {
    const { announces, child, state } = await spawnAndSettle(answers("", ""));
    const runtime = /Stats: runtime (\S+) /.exec(announces[0].text)![1];
    expect(announces[0].text).toBe(
      [
        "Status: completed successfully",
        "Result: (no output)",
        expectedStats(child, state.meta.sessionId, runtime),
      ].join("\n"),
    );
  });

  it("timeout: the deadline alarm aborts the run (runTimeoutSeconds), the announce says timed out and counts the tokens of the step that finished", async () => {
    // One finished step (a tool call: 1,200 in / 34 out), then the model hangs until the deadline.
    const { announces, child, runId, state } = await spawnAndSettle(
      (c) =>
        c.step === "task"
          ? c.hasToolResult
            ? "hang"
            : { toolCall: { name: "agents_list", args: {} } }
          : c.step === "announce"
            ? "ran out of time"
            : "hi",
      {
        config: { tools: { subagents: { tools: { allow: ["agents_list"] } } } },
        args: { runTimeoutSeconds: 5 },
        beforeSettle: async (child) => {
          // The deadline is the run's start + runTimeoutSeconds. The clock is moved explicitly (real time passes
          // under load): with the deadline still ahead an alarm leaves the run going; once it is due, the alarm aborts it.
          const runIdOfChild = (await childState(child)).runs[0].id;
          const pinDeadline = (dueAt: () => number) =>
            runInDurableObject(sessionStub(child), (_obj, state) => {
              const sql = state.storage.sql;
              const { started_at } = sql
                .exec<{ started_at: number }>("SELECT started_at FROM runs WHERE id = ?", runIdOfChild)
                .one();
              const { due_at } = sql
                .exec<{ due_at: number }>("SELECT due_at FROM timers WHERE kind = 'deadline' AND ref = ?", runIdOfChild)
                .one();
              sql.exec("UPDATE timers SET due_at = ? WHERE kind = 'deadline' AND ref = ?", dueAt(), runIdOfChild);
              return due_at - started_at;
            });
          expect(await pinDeadline(() => Date.now() + 60_000)).toBe(5_000);
          await runDurableObjectAlarm(sessionStub(child));
          expect((await call("GET", `/v1/runs/${runIdOfChild}`)).json.status).toBe("running");
          await pinDeadline(() => Date.now());
          await runDurableObjectAlarm(sessionStub(child));
        },
      },
    );
    const run = (await call("GET", `/v1/runs/${runId}`)).json;
    expect(run.status).toBe("timeout");
    expect(run.error).toMatch(/^Run timed out after /);
    expect(run.usage).toEqual({ input: 1200, output: 34, totalTokens: 1234 });
    expect(state.meta.subagent.status).toBe("timeout");
    const lines = announces[0].text.split("\n");
    expect(lines[0]).toBe("Status: timed out");
    expect(lines[1]).toBe("Result: [Partial progress: 1 tool call(s) executed before timeout]");
    expect(lines.slice(-2, -1)).toEqual(["Notes: ran out of time"]);
    const runtime = /Stats: runtime (\S+) /.exec(announces[0].text)![1];
    expect(lines[lines.length - 1]).toBe(expectedStats(child, state.meta.sessionId, runtime));
  });

  it("error: the announce says failed: <error>", async () => {
    const { announces, state } = await spawnAndSettle(answers({ error: "boom" }, "sorry"));
    expect(state.meta.subagent.status).toBe("failed");
    const lines = announces[0].text.split("\n");
    expect(lines[0]).toMatch(/^Status: failed: .*boom/);
    expect(lines.slice(1, 3)).toEqual(["Result: (no output)", "Notes: sorry"]);
  });
});

describe("sub-agent announce: silence and routing", () => {
  it.each(["ANNOUNCE_SKIP", "  ANNOUNCE_SKIP \n", "NO_REPLY"])(
    "announce step %j stays silent, and still frees the requester's slot",
    async (skip) => {
      const { req, announces } = await spawnAndSettle(answers("secret result", skip), {
        config: { subagents: { maxChildrenPerAgent: 1 } },
      });
      expect(announces).toEqual([]);
      expect((await outboxOf(req)).filter((o) => o.kind === "subagent_announce")).toEqual([]);
      expect((await invoke("sessions_spawn", { task: "next" }, { sessionKey: req })).details.status).toBe("accepted");
    },
  );

  it("ANNOUNCE_SKIP with cleanup delete: silent, and the child is still deleted", async () => {
    const { announces, state } = await spawnAndSettle(answers("r", "ANNOUNCE_SKIP"), { args: { cleanup: "delete" } });
    expect(announces).toEqual([]);
    expect(state.exists).toBe(false);
  });

  it("the announce step has its own deadline (announceTimeoutMs): when it times out the outcome is still announced, without notes", async () => {
    const { announces, state } = await spawnAndSettle(answers("task result", "hang"), {
      config: { subagents: { announceTimeoutMs: 30_000 } },
      beforeSettle: async (child) => {
        const stub = sessionStub(child);
        for (let i = 0; i < 20; i++) {
          const s = await childState(child);
          const step = s.runs.find((r) => r.kind === "subagent_announce");
          if (step?.status === "running") {
            // 25 s of the 30 s deadline, not 29 s: the real time that passes under load must stay inside the margin.
            await advance(child, 25_000);
            expect((await childState(child)).runs.find((r) => r.kind === "subagent_announce")!.status).toBe("running");
            await advance(child, 5_000);
            return;
          }
          for (const id of s.pendingRuns.filter((id) => id !== step?.id)) await stub.waitRun(id, 5_000);
          await runDurableObjectAlarm(stub);
        }
        throw new Error("the announce step never started");
      },
    });
    expect(state.runs.map((r) => [r.kind, r.status])).toEqual([
      ["subagent_task", "ok"],
      ["subagent_announce", "timeout"],
    ]);
    expect(announces).toHaveLength(1);
    expect(announces[0].text.split("\n").slice(0, 2)).toEqual([
      "Status: completed successfully",
      "Result: task result",
    ]);
    expect(announces[0].text.split("\n")[2]).toMatch(/^Stats: /);
  });

  it("a requester with no route gets the announce only in its transcript (internal injection)", async () => {
    const { req, announces } = await spawnAndSettle(answers("r", "n"), { route: false });
    expect(announces).toHaveLength(1);
    expect(await outboxOf(req)).toEqual([]);
  });

  it("the hand-off is idempotent on announce:v1:<child>:<run>: a repeated hand-off records and delivers once", async () => {
    setConfigOverride(subagentConfig());
    const fakes = installFakes(() => "hi");
    const req = requesterKey("idem");
    await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
    const child = "agent:main:subagent:00000000-0000-4000-8000-000000000001";
    const h = {
      idempotencyKey: announceIdempotencyKey(child, "run-1"),
      childKey: child,
      childRunId: "run-1",
      message: "Status: completed successfully\nResult: x",
    };
    const first = await handAnnounceToRequester(env, req, h);
    const again = await handAnnounceToRequester(env, req, h);
    expect(first).toMatchObject({ duplicate: false, recorded: true });
    expect(again).toEqual({ duplicate: true, recorded: false });
    expect(await announcesIn(req, child)).toHaveLength(1);
    expect((await outboxOf(req)).filter((o) => o.idempotency_key === h.idempotencyKey)).toHaveLength(1);
    // Delivered here, once: left due, the requester's alarm would post it into whichever test runs next.
    await runDurableObjectAlarm(sessionStub(req));
    expect((await outboxOf(req)).filter((o) => o.idempotency_key === h.idempotencyKey)).toMatchObject([
      { status: "delivered", attempts: 1 },
    ]);
    expect(fakes.hooks.filter((x) => x.headers["idempotency-key"] === h.idempotencyKey)).toHaveLength(1);
  });
});

describe("sub-agent announce: delivery", () => {
  it("is retried with backoff until the channel accepts it, with the same idempotency key", async () => {
    let calls = 0;
    const { req, child, runId, fakes } = await spawnAndSettle(answers("r", "n"), {
      hookStatus: () => (++calls <= 2 ? 503 : 200),
    });
    for (
      let i = 0;
      i < 5 && !(await outboxOf(req)).some((o) => o.kind === "subagent_announce" && o.status === "delivered");
      i++
    )
      await advance(req, 10 * 60_000);
    expect((await outboxOf(req)).filter((o) => o.kind === "subagent_announce")).toMatchObject([
      { status: "delivered", attempts: 3 },
    ]);
    const keys = fakes.hooks
      .filter((h) => h.body.kind === "subagent_announce" && h.body.sessionKey === req)
      .map((h) => h.headers["idempotency-key"]);
    expect(keys).toEqual(Array(3).fill(announceIdempotencyKey(child, runId)));
    expect(await announcesIn(req, child)).toHaveLength(1);
  });

  it("when delivery finally fails, the requester is told in its transcript (once)", async () => {
    setConfigOverride(subagentConfig());
    const fakes = installFakes(answers("r", "n"));
    fakes.hookStatus = () => 404;
    const req = requesterKey("dead");
    await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
    const r = await invoke("sessions_spawn", { task: "t" }, { sessionKey: req });
    const child = r.details.childSessionKey;
    await settle(child);
    await runDurableObjectAlarm(sessionStub(req));
    await advance(req, 60_000);
    const row = (await outboxOf(req)).find((o) => o.kind === "subagent_announce")!;
    expect(row.status).toBe("dead");
    const msgs = await announcesIn(req, child);
    expect(msgs).toHaveLength(2);
    expect(msgs[0].text).toMatch(/^Status: completed successfully/);
    expect(msgs[1].text).toMatch(
      new RegExp(
        `^\\[Subagent announce undelivered\\] The completion announce of ${child} could not be delivered to webchat \\(alice\\): HTTP 404.*\\. It is recorded above in this session's transcript\\.$`,
      ),
    );
    await advance(req, 60 * 60_000);
    expect(await announcesIn(req, child)).toHaveLength(2);
  });
});

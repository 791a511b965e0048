import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { RunQueue } from "../../src/session/run-queue";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { DEFAULT_ACKNOWLEDGMENT } from "../../src/tools/sessions-yield";
import { advance, call, enc, sessionStub } from "../helpers/http";
import { delivered, drive, unfinished } from "../helpers/requester-turns";
import { crash } from "../helpers/restart";
import { deferred, until } from "../helpers/scripted";
import {
  announcesIn,
  installFakes,
  outboxOf,
  releaseAndQuiesce,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";
import { batchesOf, childrenOf, isResume, resumeRuns, start, yieldingAnswers } from "../helpers/yield";

/**
 * sessions_yield across evictions (docs/subagents.md, "sessions_yield"): whatever instance is lost, and
 * whenever, the session resumes exactly once with every child's result, and nothing is told twice.
 */

afterEach(releaseAndQuiesce);

describe("sessions_yield: the yielded batch across evictions", () => {
  it.each([1, 2])("evictions between every step repeat nothing and lose nothing (%i per step)", async (perStep) => {
    const { req, fakes } = await start(3);
    const kids = await childrenOf(req);
    expect(kids).toHaveLength(3);
    let hits = 0;
    const evict = async () => {
      for (let i = 0; i < perStep; i++) {
        if (await unfinished([req, ...kids])) hits++;
        await crash(...[req, ...kids].map(sessionStub));
        for (const key of [req, ...kids]) await runDurableObjectAlarm(sessionStub(key));
      }
    };
    await evict();
    await drive(() => [req, ...kids], evict);
    await drive(() => [req, ...kids]);
    expect(hits).toBeGreaterThan(0);

    // Exactly one resume turn, which read all three results; one answer reached the user.
    const resumes = await resumeRuns(req);
    expect(resumes).toHaveLength(1);
    expect(resumes[0].status).toBe("ok");
    const inputs = new Set(fakes.model.filter(isResume).map((c) => c.lastUser));
    expect(inputs.size).toBe(1);
    const [input] = inputs;
    for (const part of ["part 1", "part 2", "part 3"]) expect(input).toContain(`result of ${part}`);
    const answers = delivered(fakes, req).filter((d) => d.message !== DEFAULT_ACKNOWLEDGMENT);
    expect(answers.map((d) => d.message)).toEqual(["final answer from 3 results"]);
    expect(await announcesIn(req)).toEqual([]);
    expect((await batchesOf(req)).map((b) => b.state)).toEqual(["done"]);
    expect((await outboxOf(req)).filter((o) => o.status !== "delivered")).toEqual([]);
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
  });

  it("the yielding run's executor lost mid-turn: the retried turn's batch holds every child of the turn", async () => {
    setConfigOverride(subagentConfig());
    const hold = deferred<void>();
    let held = false;
    const base = yieldingAnswers(2);
    const fakes = installFakes(async (c) => {
      if (c.lastUser === "go" && c.toolResults === 1 && !held) {
        held = true;
        await hold.promise; // the instance crashes while this call is open
        return "never seen";
      }
      return base(c);
    });
    const req = requesterKey("yield");
    const sent = await call("POST", `/v1/sessions/${enc(req)}/messages`, {
      message: "go",
      channel: "webchat",
      to: "alice",
      deliver: true,
    });
    await until(async () => expect(held).toBe(true));
    await crash(sessionStub(req));
    hold.resolve();
    // The lease finds the executor gone and queues the run again; the retry spawns again and yields.
    await advance(req, 60_000);
    await sessionStub(req).waitRun(sent.json.runId, 10_000);
    const kids = await childrenOf(req);
    expect(kids).toHaveLength(3);
    expect((await batchesOf(req)).map((b) => [b.state, b.data.children])).toEqual([["waiting", kids]]);
    for (const kid of kids) await settle(kid);
    await runDurableObjectAlarm(sessionStub(req));
    await sessionStub(req).waitRun((await resumeRuns(req))[0].id, 10_000);
    expect(await resumeRuns(req)).toHaveLength(1);
    expect(fakes.model.find(isResume)!.lastUser.match(/status: ok/g)).toHaveLength(3);
  });

  it("the yielding run's executor lost after its claim: the turn is not run again, the batch goes on", async () => {
    setConfigOverride(subagentConfig());
    const fakes = installFakes(yieldingAnswers(2));
    // The instance is lost between the claim and the run's end: its end is never written by this executor.
    const realFinish = RunQueue.prototype.finishRun;
    let dropped = 0;
    vi.spyOn(RunQueue.prototype, "finishRun").mockImplementation(function (this: RunQueue, runId, outcome) {
      if (dropped === 0 && outcome.reply === DEFAULT_ACKNOWLEDGMENT) {
        dropped++;
        return Promise.resolve();
      }
      return realFinish.call(this, runId, outcome);
    });
    const req = requesterKey("yield");
    const sent = await call("POST", `/v1/sessions/${enc(req)}/messages`, {
      message: "go",
      channel: "webchat",
      to: "alice",
    });
    await until(async () => expect(dropped).toBe(1));
    await advance(req, 60_000); // its lease finds no executor
    expect(await sessionStub(req).waitRun(sent.json.runId, 10_000)).toMatchObject({ status: "lost" });
    const kids = await childrenOf(req);
    expect(kids).toHaveLength(2);
    expect((await batchesOf(req)).map((b) => [b.state, b.data.children])).toEqual([["waiting", kids]]);
    for (const kid of kids) await settle(kid);
    await runDurableObjectAlarm(sessionStub(req));
    await sessionStub(req).waitRun((await resumeRuns(req))[0].id, 10_000);
    expect(await resumeRuns(req)).toHaveLength(1);
    expect(fakes.model.filter((c) => c.lastUser === "go")).toHaveLength(3);
    expect(fakes.model.find(isResume)!.lastUser.match(/status: ok/g)).toHaveLength(2);
  });
});

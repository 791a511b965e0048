import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { SessionObject } from "../../src/session/session-object";
import { CRON_REFUSAL, NO_CLAIM, NOT_SUPPORTED, WAIT_FOR_MESSAGE_UNSUPPORTED } from "../../src/spawn/yield-claim";
import { SETTLED_LINE } from "../../src/spawn/yield-settlement";
import {
  ALREADY_PENDING_END,
  DEFAULT_ACKNOWLEDGMENT,
  DEFERRED_MESSAGE,
  TURN_ENDED,
  WAIT_FOR_INVALID,
} from "../../src/tools/sessions-yield";
import { invoke, sendAndWait, sessionStub } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";
import {
  childState,
  installFakes,
  type ModelAnswer,
  type ModelCall,
  releaseAndQuiesce,
  releaseHangingRequests,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * `sessions_yield`'s parameters, outcomes, texts and result shapes (docs/subagents.md, "sessions_yield");
 * the batch it starts and the resumed turn: test/spawn/yield-batch.test.ts.
 */

/** The tool results of a session's transcript, parsed, by tool name. */
async function toolResults(key: string, name = "sessions_yield"): Promise<any[]> {
  return runInDurableObject(sessionStub(key), (_o: SessionObject, state) =>
    state.storage.sql
      .exec<{ json: string }>("SELECT json FROM messages WHERE role = 'toolResult' ORDER BY seq")
      .toArray()
      .map((r) => JSON.parse(r.json))
      .filter((m) => m.toolName === name)
      .map((m) => JSON.parse(m.content.map((b: any) => b.text ?? "").join(""))),
  );
}

/** A requester whose turns follow `script` (by the message and the tool results so far); children answer at once. */
function scripted(script: (c: ModelCall) => ModelAnswer) {
  setConfigOverride(subagentConfig());
  return installFakes((c) =>
    c.step === "task" ? "child result" : c.step === "announce" ? "ANNOUNCE_SKIP" : script(c),
  );
}

const spawn = (label: string) => ({ name: "sessions_spawn", args: { task: label, label } });
const yieldCall = (args: Record<string, unknown> = {}) => ({ name: "sessions_yield", args });

afterEach(releaseAndQuiesce);

describe("sessions_yield over /tools/invoke", () => {
  it("has no turn to end there: the spec's error, as a result", async () => {
    const key = requesterKey("y");
    expect((await invoke("sessions_yield", {}, { sessionKey: key })).details).toEqual({
      status: "error",
      error: NOT_SUPPORTED,
    });
    expect((await invoke("sessions_yield", { waitFor: "message" }, { sessionKey: key })).details).toEqual({
      status: "error",
      error: NOT_SUPPORTED,
    });
  });

  it('waitFor must be "message"; sizes are bounded; unknown parameters are named', async () => {
    const key = requesterKey("y");
    expect((await invoke("sessions_yield", { waitFor: "children" }, { sessionKey: key })).details).toEqual({
      status: "error",
      error: WAIT_FOR_INVALID,
    });
    const long = await invoke("sessions_yield", { message: "x".repeat(4097) }, { sessionKey: key });
    expect(long.status).toBe(400);
    expect(long.body.error.message).toBe("message: Too big: expected string to have <=4096 characters");
    const ack = await invoke("sessions_yield", { acknowledgment: "x".repeat(2001) }, { sessionKey: key });
    expect(ack.status).toBe(400);
    const unknown = await invoke("sessions_yield", { seconds: 3 }, { sessionKey: key });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toBe("seconds: unknown parameter for sessions_yield");
  });
});

describe("sessions_yield inside a run", () => {
  it("yielded: {status, acknowledgment}; the user's turn replies with that acknowledgment", async () => {
    scripted((c) =>
      c.lastUser !== "go"
        ? "later"
        : c.toolResults === 0
          ? { toolCall: spawn("a") }
          : { toolCall: yieldCall({ acknowledgment: "On it — back soon." }) },
    );
    const key = requesterKey("y");
    const run = await sendAndWait(key, "go");
    expect(run).toMatchObject({ status: "ok", reply: "On it — back soon." });
    expect(await toolResults(key)).toEqual([{ status: "yielded", acknowledgment: "On it — back soon." }]);
  });

  it("no child of this turn and none pending: the spec's error, and the turn goes on", async () => {
    const fakes = scripted((c) => (c.toolResults === 0 ? { toolCall: yieldCall() } : "done normally"));
    const key = requesterKey("y");
    expect(await sendAndWait(key, "go")).toMatchObject({ status: "ok", reply: "done normally" });
    expect(await toolResults(key)).toEqual([{ status: "error", error: NO_CLAIM }]);
    expect(fakes.model.filter((c) => c.lastUser === "go")).toHaveLength(2);
  });

  it("deferred beside another call of the same response; the calls after a yield are not run", async () => {
    scripted((c) => {
      if (c.lastUser !== "go") return "later";
      if (c.toolResults === 0) return { toolCalls: [spawn("a"), yieldCall()] };
      return { toolCalls: [yieldCall(), spawn("b")] };
    });
    const key = requesterKey("y");
    const run = await sendAndWait(key, "go");
    expect(run).toMatchObject({ status: "ok", reply: DEFAULT_ACKNOWLEDGMENT });
    expect(await toolResults(key)).toEqual([{ status: "deferred", message: DEFERRED_MESSAGE }, { status: "yielded" }]);
    const spawns = await toolResults(key, "sessions_spawn");
    expect(spawns[0]).toMatchObject({ status: "accepted" });
    expect(spawns[1]).toEqual({ status: "error", error: TURN_ENDED });
    // Only the first spawn happened, and it is the batch.
    const flows = (await childState(key)).flows;
    expect(flows.filter((f) => f.id.startsWith("child:"))).toHaveLength(1);
    expect(flows.filter((f) => f.id.startsWith("yield:")).map((f) => f.state)).toEqual(["waiting"]);
  });

  it("already_pending: children of an earlier turn, with their task runs; the turn goes on", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => {
      if (c.step === "task") return "hang";
      if (c.lastUser === "first") return c.toolResults === 0 ? { toolCall: spawn("slow part") } : "spawned";
      if (c.lastUser === "second") return c.toolResults === 0 ? { toolCall: yieldCall() } : "ok then";
      return "x";
    });
    const key = requesterKey("y");
    await sendAndWait(key, "first");
    expect(await sendAndWait(key, "second")).toMatchObject({ reply: "ok then" });
    const [res] = await toolResults(key);
    const child = (await childState(key)).flows.find((f) => f.id.startsWith("child:"))!.id.slice("child:".length);
    const taskRun = (await childState(child)).runs.find((r) => r.kind === "subagent_task")!.id;
    expect(res.status).toBe("already_pending");
    expect(res.pendingChildren).toEqual([
      {
        runId: taskRun,
        childSessionKey: child,
        label: "slow part",
        startedAt: expect.any(Number),
        state: "running",
        wakeArmed: false,
      },
    ]);
    expect(res.message).toContain(
      `- slow part (${child}), running, started ${new Date(res.pendingChildren[0].startedAt).toISOString()}`,
    );
    expect(res.message.endsWith(ALREADY_PENDING_END)).toBe(true);
    releaseHangingRequests();
  });

  it("a new message while the session waits on its batch: a yield there is already_pending, wakeArmed", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => {
      if (c.step === "task") return "hang";
      if (c.lastUser === "first") return c.toolResults === 0 ? { toolCall: spawn("slow") } : { toolCall: yieldCall() };
      if (c.lastUser === "meanwhile") return c.toolResults === 0 ? { toolCall: yieldCall() } : "still waiting";
      return "x";
    });
    const key = requesterKey("y");
    expect(await sendAndWait(key, "first")).toMatchObject({ reply: DEFAULT_ACKNOWLEDGMENT });
    // The session is not blocked while it waits: a new message runs a normal turn.
    expect(await sendAndWait(key, "meanwhile")).toMatchObject({ reply: "still waiting" });
    const [, second] = await toolResults(key);
    expect(second.status).toBe("already_pending");
    expect(second.pendingChildren).toEqual([
      expect.objectContaining({ label: "slow", state: "running", wakeArmed: true }),
    ]);
    releaseHangingRequests();
  });

  it("the resumed turn may spawn and yield again: a new batch, and one answer at the end", async () => {
    setConfigOverride(subagentConfig());
    const fakes = installFakes((c) => {
      if (c.step === "task") return `done: ${/\[Subagent Task\]: (.*)$/m.exec(c.lastUser)?.[1]}`;
      if (c.step === "announce") return "notes";
      if (c.lastUser.includes(SETTLED_LINE)) {
        if (c.lastUser.includes("done: second")) return "both parts are done";
        return c.toolResults === 0 ? { toolCall: spawn("second") } : { toolCall: yieldCall() };
      }
      return c.toolResults === 0 ? { toolCall: spawn("first") } : { toolCall: yieldCall() };
    });
    const key = requesterKey("y");
    await sendAndWait(key, "go", { channel: "webchat", to: "alice", deliver: true });
    const children = async () =>
      (await childState(key)).flows.filter((f) => f.id.startsWith("child:")).map((f) => f.id.slice("child:".length));
    const drain = async () => {
      for (const kid of await children()) await settle(kid);
      await runDurableObjectAlarm(sessionStub(key));
      for (const id of (await childState(key)).pendingRuns) await sessionStub(key).waitRun(id, 10_000);
    };
    await drain();
    expect(await children()).toHaveLength(2);
    await drain();
    await quiesce();
    const flows = (await childState(key)).flows.filter((f) => f.id.startsWith("yield:"));
    expect(flows.map((f) => f.state)).toEqual(["done", "done"]);
    expect(fakes.model.filter((c) => c.lastUser.includes(SETTLED_LINE) && c.toolResults === 0)).toHaveLength(2);
    const answers = fakes.hooks.map((h) => h.body.message).filter((m) => m !== DEFAULT_ACKNOWLEDGMENT);
    expect(answers).toEqual(["both parts are done"]);
  });

  it('a cron session cannot yield; waitFor "message" is refused honestly', async () => {
    scripted((c) =>
      c.toolResults === 0 ? { toolCall: spawn("a") } : c.toolResults === 1 ? { toolCall: yieldCall() } : "fine",
    );
    const cron = `agent:main:cron:job-${crypto.randomUUID().slice(0, 6)}`;
    expect(await sendAndWait(cron, "go")).toMatchObject({ reply: "fine" });
    expect(await toolResults(cron)).toEqual([{ status: "error", error: CRON_REFUSAL }]);
    expect(WAIT_FOR_MESSAGE_UNSUPPORTED).toContain('waitFor: "message" is not supported');
  });
});

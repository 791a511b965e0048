import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import {
  announcesIn,
  childState,
  installFakes,
  type ModelAnswer,
  type ModelCall,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * `runTimeoutSeconds` of sessions_spawn (omitted → agents.defaults.subagents.runTimeoutSeconds, else 0;
 * 0 = no timeout, replacing the general run deadline for the child's task) and the honest figures of
 * the announce's stats line for children cut short.
 */

async function spawn(
  answer: (c: ModelCall) => ModelAnswer,
  opts: { config?: Record<string, any>; args?: Record<string, unknown> } = {},
) {
  setConfigOverride(subagentConfig(opts.config ?? {}));
  const fakes = installFakes(answer);
  const req = requesterKey("timeout");
  await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
  const r = await invoke(
    "sessions_spawn",
    { task: "research for a long time", ...(opts.args ?? {}) },
    { sessionKey: req },
  );
  expect(r.details.status).toBe("accepted");
  return { req, child: r.details.childSessionKey as string, runId: r.details.runId as string, fakes };
}

async function runStatus(runId: string): Promise<string> {
  return (await call("GET", `/v1/runs/${runId}`)).json.status;
}

/** Wait until the child's task run is executing (its model call is in flight). */
async function untilRunning(runId: string, fakes: { model: ModelCall[] }): Promise<void> {
  await vi.waitFor(() => expect(fakes.model.some((c) => c.step === "task")).toBe(true), {
    timeout: 10_000,
    interval: 10,
  });
  expect(await runStatus(runId)).toBe("running");
}

const TASK_HANGS = (c: ModelCall): ModelAnswer => (c.step === "task" ? "hang" : "hi");

describe("sessions_spawn runTimeoutSeconds", () => {
  it("omitted, no config default: the child's run has no timeout — 700 s of moved time later it still runs (past the general 600 s deadline)", async () => {
    const { child, runId, fakes } = await spawn(TASK_HANGS);
    await untilRunning(runId, fakes);
    expect((await childState(child)).timers.filter((t) => t.kind === "deadline")).toEqual([]);
    for (let i = 0; i < 7; i++) await advance(child, 100_000);
    expect(await runStatus(runId)).toBe("running");
    // The lease is still there (renewed by the live executor): a lost executor would still be caught.
    expect((await childState(child)).timers.map((t) => t.kind)).toContain("lease");
  });

  it("explicit 0 wins over the config default: no timeout", async () => {
    const { child, runId, fakes } = await spawn(TASK_HANGS, {
      config: { subagents: { runTimeoutSeconds: 30 } },
      args: { runTimeoutSeconds: 0 },
    });
    await untilRunning(runId, fakes);
    await advance(child, 700_000);
    expect(await runStatus(runId)).toBe("running");
  });

  it("omitted: agents.defaults.subagents.runTimeoutSeconds applies", async () => {
    const { child, runId, fakes } = await spawn(TASK_HANGS, { config: { subagents: { runTimeoutSeconds: 30 } } });
    await untilRunning(runId, fakes);
    await advance(child, 29_000);
    expect(await runStatus(runId)).toBe("running");
    await advance(child, 1_000);
    expect((await call("GET", `/v1/runs/${runId}`)).json).toMatchObject({
      status: "timeout",
      error: "Run timed out after 30s",
    });
  });

  it("the general deadline still applies to a session's ordinary runs", async () => {
    setConfigOverride(subagentConfig({ defaults: { timeoutSeconds: 600 } }));
    installFakes(() => "hang");
    const key = requesterKey("plain");
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "hello" });
    await vi.waitFor(async () => expect(await runStatus(r.json.runId)).toBe("running"), {
      timeout: 10_000,
      interval: 10,
    });
    await advance(key, 600_000);
    expect(await runStatus(r.json.runId)).toBe("timeout");
  });

  it("the tool description states the rule", async () => {
    const tools = (await call("GET", "/v1/tools")).json;
    const spawnTool = (tools.tools ?? tools).find((t: any) => t.name === "sessions_spawn");
    const desc = JSON.stringify(spawnTool);
    expect(desc).toContain(
      "Seconds until the sub-agent's run is aborted (it then announces timed out). Omitted: agents.defaults.subagents.runTimeoutSeconds when set, otherwise 0. 0 = no timeout: the run is not cut by the general run deadline either.",
    );
  });
});

describe("honest figures in the announce stats line", () => {
  /** The first task step calls a tool (1,200 in / 34 out), the second fails or hangs. */
  const stepThen =
    (second: ModelAnswer) =>
    (c: ModelCall): ModelAnswer =>
      c.step === "task"
        ? c.hasToolResult
          ? second
          : { toolCall: { name: "agents_list", args: {} } }
        : c.step === "announce"
          ? ""
          : "hi";
  const tools = { subagents: { tools: { allow: ["agents_list"] } } };

  it("a failed child reports the tokens of the steps it finished", async () => {
    const { req, child } = await spawn(stepThen({ error: "boom" }), { config: { tools } });
    await settle(child);
    await runDurableObjectAlarm(sessionStub(req));
    const [announce] = await announcesIn(req, child);
    expect(announce.text.split("\n")[0]).toMatch(/^Status: failed: .*boom/);
    expect(announce.text).toMatch(
      /\nStats: runtime \S+ • tokens 1\.2k \(in 1\.2k \/ out 34\) • est \$0\.0041 • sessionKey /,
    );
  });

  it("a timed-out child reports the tokens of the steps it finished", async () => {
    const { req, child, runId, fakes } = await spawn(stepThen("hang"), {
      config: { tools },
      args: { runTimeoutSeconds: 5 },
    });
    await vi.waitFor(() => expect(fakes.model.filter((c) => c.step === "task" && c.hasToolResult)).toHaveLength(1), {
      timeout: 10_000,
      interval: 10,
    });
    await advance(child, 5_000);
    expect(await runStatus(runId)).toBe("timeout");
    await settle(child);
    await runDurableObjectAlarm(sessionStub(req));
    const [announce] = await announcesIn(req, child);
    expect(announce.text.split("\n")[0]).toBe("Status: timed out");
    expect(announce.text).toMatch(
      /\nStats: runtime \S+ • tokens 1\.2k \(in 1\.2k \/ out 34\) • est \$0\.0041 • sessionKey /,
    );
    // The session's own counters agree.
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).json).toMatchObject({ inputTokens: expect.any(Number) });
    expect((await call("GET", `/v1/runs/${runId}`)).json.usage).toEqual({ input: 1200, output: 34, totalTokens: 1234 });
  });
});

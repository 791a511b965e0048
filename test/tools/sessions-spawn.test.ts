import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { ACCEPTED_NOTE_DIRECT, ACCEPTED_NOTE_SESSION } from "../../src/spawn/subagent-prompt";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import {
  announcesIn,
  childState,
  installFakes,
  releaseAndSettleChildren,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

afterEach(releaseAndSettleChildren);

const CHILD_RE = /^agent:main:subagent:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A requester with a channel route (webchat → alice), created by an inbound message. */
async function requesterWithRoute(tag: string): Promise<string> {
  const key = requesterKey(tag);
  await sendAndWait(key, "hello", { channel: "webchat", to: "alice" });
  return key;
}

describe("sessions_spawn: accepted", () => {
  it("returns accepted at once with the child key, run id, mode, note and modelApplied; the child is created with its lineage", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "done: 42" : c.step === "announce" ? "" : "ok"));
    const req = await requesterWithRoute("accept");
    const r = await invoke("sessions_spawn", { task: "compute the answer", label: "calc" }, { sessionKey: req });
    expect(r.status).toBe(200);
    expect(Object.keys(r.details)).toEqual(["status", "childSessionKey", "runId", "mode", "note", "modelApplied"]);
    expect(r.details).toMatchObject({
      status: "accepted",
      mode: "run",
      note: ACCEPTED_NOTE_DIRECT,
      modelApplied: true,
    });
    const child = r.details.childSessionKey as string;
    expect(child).toMatch(CHILD_RE);
    expect(typeof r.details.runId).toBe("string");

    const run = (await call("GET", `/v1/runs/${r.details.runId}/wait?timeoutMs=10000`)).json;
    expect(run).toMatchObject({ sessionKey: child, status: "ok", kind: "subagent_task", reply: "done: 42" });

    const row = (await call("GET", `/v1/sessions/${enc(child)}`)).json;
    expect(row).toMatchObject({ key: child, spawnedBy: req, spawnDepth: 1, label: "calc", model: "m1" });

    const s = await childState(child);
    expect(s.meta.modelOverride).toBe("fake/m1");
    expect(s.meta.subagent).toMatchObject({
      requesterKey: req,
      requesterChannel: "webchat",
      requesterRoute: { channel: "webchat", to: "alice" },
      task: "compute the answer",
      mode: "run",
      cleanup: "keep",
    });

    // The task message and the sub-agent context (src/spawn/subagent-prompt.ts).
    const hist = (await call("GET", `/v1/sessions/${enc(child)}/history`)).json;
    const first = hist.messages[0];
    expect(first.role).toBe("user");
    expect(first.content[0].text).toBe(
      "[Subagent Context] You are running as a subagent (depth 1/1). Results auto-announce to your requester; do not busy-poll for status.\n\n[Subagent Task]: compute the answer",
    );
    expect(first.provenance).toEqual({
      kind: "inter_session",
      sourceSessionKey: req,
      sourceChannel: "webchat",
      sourceTool: "sessions_spawn",
    });
    await settle(child);
    expect(await announcesIn(req, child)).toHaveLength(1);
  });

  it("never blocks: the result arrives while the child's run is still running", async () => {
    setConfigOverride(subagentConfig({ subagents: { runTimeoutSeconds: 30 } }));
    installFakes((c) => (c.step === "task" ? "hang" : "ok"));
    const req = await requesterWithRoute("noblock");
    const r = await invoke("sessions_spawn", { task: "slow" }, { sessionKey: req });
    expect(r.details.status).toBe("accepted");
    const run = (await call("GET", `/v1/runs/${r.details.runId}`)).json;
    expect(["queued", "running"]).toContain(run.status);
    // runTimeoutSeconds defaults to agents.defaults.subagents.runTimeoutSeconds; the run's deadline ends it.
    expect((await childState(r.details.childSessionKey)).meta.subagent.runTimeoutSeconds).toBe(30);
    await advance(r.details.childSessionKey, 30_000);
    expect((await call("GET", `/v1/runs/${r.details.runId}`)).json.status).toBe("timeout");
  });

  it("a cron requester in run mode gets no note; thread-bound session mode gets the session note", async () => {
    setConfigOverride(
      subagentConfig({ channels: { webchat: { webhookUrl: "https://hooks.test/webchat", threadBindings: true } } }),
    );
    installFakes(() => "ok");
    const cron = await invoke(
      "sessions_spawn",
      { task: "nightly" },
      { sessionKey: `agent:main:cron:job-${crypto.randomUUID().slice(0, 6)}` },
    );
    expect(cron.details.status).toBe("accepted");
    expect("note" in cron.details).toBe(false);
    const req = await requesterWithRoute("thread");
    const t = await invoke("sessions_spawn", { task: "stay", thread: true }, { sessionKey: req });
    expect(t.details).toMatchObject({ status: "accepted", mode: "session", note: ACCEPTED_NOTE_SESSION });
    // Session mode forces cleanup "keep".
    expect((await childState(t.details.childSessionKey)).meta.subagent).toMatchObject({
      mode: "session",
      cleanup: "keep",
    });
    const task = (await childState(t.details.childSessionKey)).meta;
    expect(task.spawnedBy).toBe(req);
  });
});

describe("sessions_spawn: input errors (400)", () => {
  it("task is required", async () => {
    setConfigOverride(subagentConfig());
    const r = await invoke("sessions_spawn", { label: "x" });
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual({ type: "invalid_request", message: "task required" });
  });

  it.each([
    ["to", "to"],
    ["channel", "channel"],
    ["thread_id", "threadId"],
    ["reply_to", "replyTo"],
    ["target", "target"],
    ["transport", "transport"],
  ])("channel-delivery key %s is refused by name", async (key, shown) => {
    setConfigOverride(subagentConfig());
    const r = await invoke("sessions_spawn", { task: "t", [key]: "x" });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe(
      `sessions_spawn does not support "${shown}". Use "message" or "sessions_send" for channel delivery.`,
    );
  });

  it("unknown enum values name the field", async () => {
    setConfigOverride(subagentConfig());
    const r = await invoke("sessions_spawn", { task: "t", cleanup: "archive" });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/^cleanup: /);
  });
});

describe("sessions_spawn: checks in OpenClaw's order", () => {
  it.each(["Agent not found: xyz", "../../../etc/passwd", "a".repeat(65)])("invalid agentId %s", async (agentId) => {
    setConfigOverride(subagentConfig());
    const r = await invoke("sessions_spawn", { task: "t", agentId });
    expect(r.status).toBe(200);
    expect(r.details).toEqual({
      status: "error",
      error: `Invalid agentId "${agentId}". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.`,
    });
  });

  it("a valid but unconfigured agentId is accepted when allowlisted (allowlisted-but-unconfigured)", async () => {
    setConfigOverride(subagentConfig({ subagents: { allowAgents: ["my-research_agent01"] } }));
    installFakes(() => "ok");
    const r = await invoke("sessions_spawn", { task: "t", agentId: "my-research_agent01" });
    expect(r.details.status).toBe("accepted");
    expect(r.details.childSessionKey).toMatch(/^agent:my-research_agent01:subagent:/);
  });

  it('mode="session" requires thread=true', async () => {
    setConfigOverride(subagentConfig());
    const r = await invoke("sessions_spawn", { task: "t", mode: "session" });
    expect(r.details).toEqual({
      status: "error",
      error: 'mode="session" requires thread=true so the subagent can stay bound to a thread.',
    });
  });

  it("depth: a sub-agent at the default max depth 1 is forbidden (when its tool policy lets it call sessions_spawn at all)", async () => {
    setConfigOverride(subagentConfig({ tools: { subagents: { tools: { allow: ["sessions_spawn"] } } } }));
    installFakes(() => "ok");
    const parent = await invoke("sessions_spawn", { task: "parent" });
    const child = parent.details.childSessionKey;
    const r = await invoke("sessions_spawn", { task: "grandchild" }, { sessionKey: child });
    expect(r.details).toEqual({
      status: "forbidden",
      error: "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)",
    });
  });

  it("depth: with maxSpawnDepth 2 the sub-agent may spawn and its child is at depth 2 (from stored spawnDepth)", async () => {
    setConfigOverride(
      subagentConfig({
        subagents: { maxSpawnDepth: 2 },
        tools: { subagents: { tools: { allow: ["sessions_spawn"] } } },
      }),
    );
    installFakes(() => "ok");
    const parent = await invoke("sessions_spawn", { task: "parent" });
    const r = await invoke("sessions_spawn", { task: "grandchild" }, { sessionKey: parent.details.childSessionKey });
    expect(r.details.status).toBe("accepted");
    const s = await childState(r.details.childSessionKey);
    expect(s.meta).toMatchObject({ spawnDepth: 2, spawnedBy: parent.details.childSessionKey });
    expect(s.meta.subagent.requesterKey).toBe(parent.details.childSessionKey);
    // A third level is refused at depth 2.
    const third = await invoke("sessions_spawn", { task: "deeper" }, { sessionKey: r.details.childSessionKey });
    expect(third.details).toEqual({
      status: "forbidden",
      error: "sessions_spawn is not allowed at this depth (current depth: 2, max: 2)",
    });
  });

  it("active children per requester session: (1/1) while one runs; the slot frees once the child's announce is handed back", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxChildrenPerAgent: 1 } }));
    let hang = true;
    installFakes((c) => (c.step === "task" && hang ? "hang" : "ok"));
    const req = requesterKey("cap");
    const first = await invoke("sessions_spawn", { task: "one", runTimeoutSeconds: 5 }, { sessionKey: req });
    expect(first.details.status).toBe("accepted");
    const second = await invoke("sessions_spawn", { task: "two" }, { sessionKey: req });
    expect(second.details).toEqual({
      status: "forbidden",
      error: "sessions_spawn has reached max active children for this session (1/1)",
    });
    // Another requester session has its own budget.
    expect(
      (await invoke("sessions_spawn", { task: "elsewhere" }, { sessionKey: requesterKey("cap-other") })).details.status,
    ).toBe("accepted");
    hang = false;
    await advance(first.details.childSessionKey, 5_000);
    await settle(first.details.childSessionKey);
    expect((await invoke("sessions_spawn", { task: "three" }, { sessionKey: req })).details.status).toBe("accepted");
  });

  it("active children are counted atomically: 8 concurrent spawns with max 3 → exactly 3 accepted", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxChildrenPerAgent: 3 } }));
    installFakes((c) => (c.step === "task" ? "hang" : "ok"));
    const req = requesterKey("race");
    await sessionStub(req).ensureSession();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => invoke("sessions_spawn", { task: `t${i}` }, { sessionKey: req })),
    );
    const statuses = results.map((r) => r.details.status);
    expect(statuses.filter((s) => s === "accepted")).toHaveLength(3);
    expect(statuses.filter((s) => s === "forbidden")).toHaveLength(5);
    for (const r of results.filter((x) => x.details.status === "forbidden")) {
      expect(r.details.error).toBe("sessions_spawn has reached max active children for this session (3/3)");
    }
  });

  it("requireAgentId forbids an omitted agentId", async () => {
    setConfigOverride(subagentConfig({ subagents: { requireAgentId: true } }));
    const r = await invoke("sessions_spawn", { task: "t" });
    expect(r.details).toEqual({
      status: "forbidden",
      error:
        "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids.",
    });
    installFakes(() => "ok");
    expect((await invoke("sessions_spawn", { task: "t", agentId: "main" })).details.status).toBe("accepted");
  });

  it("allowlist: same agent only by default; per-agent list, defaults fallback, '*', case-normalized ids", async () => {
    installFakes(() => "ok");
    setConfigOverride(subagentConfig());
    expect((await invoke("sessions_spawn", { task: "t", agentId: "research" })).details).toEqual({
      status: "forbidden",
      error: "agentId is not allowed for sessions_spawn (allowed: none)",
    });
    setConfigOverride(
      subagentConfig({
        list: [{ id: "main", default: true, subagents: { allowAgents: ["ops"] } }, { id: "research" }, { id: "ops" }],
      }),
    );
    expect((await invoke("sessions_spawn", { task: "t", agentId: "research" })).details.error).toBe(
      "agentId is not allowed for sessions_spawn (allowed: ops)",
    );
    setConfigOverride(subagentConfig({ subagents: { allowAgents: ["Research"] } }));
    const r = await invoke("sessions_spawn", { task: "t", agentId: "RESEARCH" });
    expect(r.details.status).toBe("accepted");
    expect(r.details.childSessionKey).toMatch(/^agent:research:subagent:/);
    setConfigOverride(
      subagentConfig({ list: [{ id: "main", default: true, subagents: { allowAgents: ["*"] } }, { id: "research" }] }),
    );
    expect((await invoke("sessions_spawn", { task: "t", agentId: "research" })).details.status).toBe("accepted");
  });

  it("sandbox: a sandboxed requester cannot spawn unsandboxed children; sandbox=require needs a sandboxed target", async () => {
    installFakes(() => "ok");
    setConfigOverride(
      subagentConfig({
        list: [
          { id: "main", default: true, sandbox: { mode: "all" }, subagents: { allowAgents: ["*"] } },
          { id: "research" },
        ],
      }),
    );
    expect((await invoke("sessions_spawn", { task: "t", agentId: "research" })).details).toEqual({
      status: "forbidden",
      error:
        "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.",
    });
    expect((await invoke("sessions_spawn", { task: "t" })).details.status).toBe("accepted");
    setConfigOverride(subagentConfig());
    expect((await invoke("sessions_spawn", { task: "t", sandbox: "require" })).details).toEqual({
      status: "forbidden",
      error:
        'sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".',
    });
  });

  it("thinking level is validated; a valid level is stored on the child", async () => {
    setConfigOverride(subagentConfig());
    installFakes(() => "ok");
    expect((await invoke("sessions_spawn", { task: "t", thinking: "ultimate" })).details).toEqual({
      status: "error",
      error:
        'Invalid thinking level "ultimate". Use one of: off, minimal, low, medium, high, xhigh, adaptive, max, ultra.',
    });
    const r = await invoke("sessions_spawn", { task: "t", thinking: "HIGH" });
    expect((await childState(r.details.childSessionKey)).meta.thinkingLevel).toBe("high");
  });

  it("an invalid model is an error, creates no child and starts no run (never a silently ignored override)", async () => {
    setConfigOverride(subagentConfig({ subagents: { maxChildrenPerAgent: 1 } }));
    const fakes = installFakes(() => "ok");
    const req = requesterKey("badmodel");
    const r = await invoke("sessions_spawn", { task: "t", model: "bad-model" }, { sessionKey: req });
    expect(r.details).toEqual({
      status: "error",
      // A bare id is OpenClaw's default provider's (openai), which has no key here.
      error:
        'invalid model: bad-model (no API key for provider "openai" (set the Worker secret CODEX_API_KEY or OPENAI_API_KEY, or models.providers.openai.apiKey))',
      childSessionKey: r.details.childSessionKey,
    });
    expect((await childState(r.details.childSessionKey)).exists).toBe(false);
    const unknown = await invoke("sessions_spawn", { task: "t", model: "nope/x" }, { sessionKey: req });
    expect(unknown.details.error).toBe(
      'invalid model: nope/x (unknown provider "nope"; configure models.providers.nope)',
    );
    // No model was called for either would-be child (other tests' children may still be running).
    expect(
      fakes.model.filter(
        (c) => c.system.includes(r.details.childSessionKey) || c.system.includes(unknown.details.childSessionKey),
      ),
    ).toHaveLength(0);
    // Nothing was reserved: the single slot is still free.
    expect(
      (await invoke("sessions_spawn", { task: "t", model: "builtin/echo" }, { sessionKey: req })).details.status,
    ).toBe("accepted");
  });

  it("model resolution: explicit → target agent's subagents.model → agent model → defaults.subagents.model → defaults.model", async () => {
    installFakes(() => "ok");
    setConfigOverride(subagentConfig({ subagents: { model: "builtin/echo" } }));
    let r = await invoke("sessions_spawn", { task: "t" });
    expect((await childState(r.details.childSessionKey)).meta.modelOverride).toBe("builtin/echo");
    setConfigOverride(
      subagentConfig({ subagents: { model: "builtin/echo" }, list: [{ id: "main", default: true, model: "fake/m1" }] }),
    );
    r = await invoke("sessions_spawn", { task: "t" });
    expect((await childState(r.details.childSessionKey)).meta.modelOverride).toBe("fake/m1");
    setConfigOverride(
      subagentConfig({ list: [{ id: "main", default: true, model: "fake/m1", subagents: { model: "builtin/echo" } }] }),
    );
    r = await invoke("sessions_spawn", { task: "t" });
    expect((await childState(r.details.childSessionKey)).meta.modelOverride).toBe("builtin/echo");
    r = await invoke("sessions_spawn", { task: "t", model: "fake/m1" });
    expect((await childState(r.details.childSessionKey)).meta.modelOverride).toBe("fake/m1");
    // The override is what actually runs (OpenClaw ignored overrides silently).
    const run = (await call("GET", `/v1/runs/${r.details.runId}/wait?timeoutMs=10000`)).json;
    expect(run.model).toBe("fake/m1");
  });

  it("thread=true is refused unless the requester's channel supports thread bindings", async () => {
    installFakes(() => "ok");
    setConfigOverride(subagentConfig());
    const noRoute = await invoke(
      "sessions_spawn",
      { task: "t", thread: true },
      { sessionKey: requesterKey("noroute") },
    );
    expect(noRoute.details.status).toBe("error");
    expect(noRoute.details.error).toBe(
      "thread=true is unavailable because this session has no channel to bind a thread in.",
    );
    const req = await requesterWithRoute("nothread");
    const r = await invoke("sessions_spawn", { task: "t", thread: true }, { sessionKey: req });
    expect(r.details.error).toBe(
      'thread=true is unavailable because channel "webchat" does not support thread bindings (set channels.webchat.threadBindings: true).',
    );
  });
});

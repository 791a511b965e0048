import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { call, enc, flushIndex, invoke, RESEARCH_TOKEN, sendAndWait, sessionStub } from "./helpers/http";
import { baseConfig, deferred, deliveriesOf, flowsOf, HOOK_BASE, installFakes, until } from "./helpers/scripted";

afterEach(() => {
  setConfigOverride(null);
  vi.restoreAllMocks();
});

let n = 0;
const uniq = (base: string) => `${base}-${++n}`;
const UUIDISH = /^[0-9a-f-]{36}/;

async function doneFlow(target: string) {
  return until(async () => {
    const f = await flowsOf(target);
    expect(f[0]?.step).toBe("done");
    return f[0];
  });
}

/** Let every flow of a session finish, so no step outlives its test (and its fake model). */
async function settle(target: string) {
  await until(async () => {
    const f = await flowsOf(target);
    expect(f.length).toBeGreaterThan(0);
    expect(f.every((x) => x.step === "done")).toBe(true);
  });
}

describe("sessions_send: parameters and refusals", () => {
  it("no sessionKey and no label → error with a runId, and nothing runs (ref §8 23)", async () => {
    setConfigOverride(baseConfig());
    const fakes = installFakes(() => "x");
    const r = await invoke("sessions_send", { message: "hi" });
    expect(r.status).toBe(200);
    expect(r.details).toEqual({
      runId: expect.stringMatching(UUIDISH),
      status: "error",
      error: "Either sessionKey or label is required",
    });
    expect(fakes.model).toHaveLength(0);
  });

  it("both sessionKey and label → error", async () => {
    setConfigOverride(baseConfig());
    const r = await invoke("sessions_send", { sessionKey: "main", label: "x", message: "hi" });
    expect(r.details).toEqual({
      runId: expect.any(String),
      status: "error",
      error: "Provide either sessionKey or label (not both).",
    });
  });

  it("message is required; timeoutSeconds must be ≥ 0 (400 naming the field)", async () => {
    setConfigOverride(baseConfig());
    const missing = await invoke("sessions_send", { sessionKey: "main", message: "   " });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ ok: false, error: { type: "invalid_request", message: "message required" } });
    const neg = await invoke("sessions_send", { sessionKey: "main", message: "x", timeoutSeconds: -1 });
    expect(neg.status).toBe(400);
    expect(neg.body.error.message).toMatch(/^timeoutSeconds: /);
    const str = await invoke("sessions_send", { sessionKey: "main", message: "x", timeout_seconds: "soon" });
    expect(str.status).toBe(400);
    expect(str.body.error.message).toMatch(/^timeoutSeconds: /);
  });

  it("label not found → error naming the label (ref §8 24); a label that exists is resolved", async () => {
    setConfigOverride(baseConfig());
    installFakes(() => "labelled reply");
    const miss = await invoke("sessions_send", { label: "no-such-label", message: "hi" });
    expect(miss.details).toMatchObject({ status: "error", error: "No session found with label: no-such-label" });

    const key = `agent:main:${uniq("worker")}`;
    const label = uniq("night-shift");
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { label })).status).toBe(200);
    const hit = await invoke("sessions_send", { label, message: "hi", timeoutSeconds: 10 });
    expect(hit.details).toMatchObject({ status: "ok", reply: "labelled reply", sessionKey: key });
    await settle(key);
  });

  it("cross-agent label lookup needs agent-to-agent policy; sandboxed callers stay in their agent", async () => {
    setConfigOverride(baseConfig({ tools: { agentToAgent: { enabled: false } } }));
    const off = await invoke("sessions_send", { label: "x", agentId: "research", message: "hi" });
    expect(off.details).toMatchObject({
      status: "forbidden",
      error: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
    });
    setConfigOverride(baseConfig({ tools: { agentToAgent: { enabled: true, allow: ["main"] } } }));
    const denied = await invoke("sessions_send", { label: "x", agentId: "research", message: "hi" });
    expect(denied.details).toMatchObject({
      status: "forbidden",
      error: "Agent-to-agent messaging denied by tools.agentToAgent.allow.",
    });
    setConfigOverride(
      baseConfig({ agents: { list: [{ id: "main", default: true, sandbox: { mode: "all" } }, { id: "research" }] } }),
    );
    const sandboxed = await invoke("sessions_send", { label: "x", agentId: "research", message: "hi" });
    expect(sandboxed.details).toMatchObject({
      status: "forbidden",
      error: "Sandboxed sessions_send label lookup is limited to this agent",
    });
    const notVisible = await invoke("sessions_send", { label: "x", message: "hi" });
    expect(notVisible.details).toMatchObject({
      status: "forbidden",
      error: "Session not visible from this sandboxed agent session.",
    });
  });

  it("cross-agent send with agent-to-agent disabled → forbidden with runId and sessionKey; nothing runs (ref §8 25)", async () => {
    setConfigOverride(baseConfig({ tools: { agentToAgent: { enabled: false } } }));
    const fakes = installFakes(() => "x");
    const r = await invoke("sessions_send", { sessionKey: "agent:research:main", message: "hi" });
    expect(r.details).toEqual({
      runId: expect.any(String),
      status: "forbidden",
      error: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
      sessionKey: "agent:research:main",
    });
    expect(fakes.model).toHaveLength(0);
  });

  it("visibility tree (the default) refuses a send to a sibling session", async () => {
    setConfigOverride(baseConfig({ tools: { sessions: {} } }));
    const target = `agent:main:${uniq("sibling")}`;
    const r = await invoke("sessions_send", { sessionKey: target, message: "hi" });
    expect(r.details).toMatchObject({
      status: "forbidden",
      error: "Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
      sessionKey: target,
    });
  });

  it("a sessionId from sessions_list resolves to its session", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "by id"));
    const key = `agent:main:${uniq("by-id")}`;
    await call("PATCH", `/v1/sessions/${enc(key)}`, { label: uniq("l") });
    await flushIndex(key);
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    const r = await invoke("sessions_send", { sessionKey: sessionId, message: "hi", timeoutSeconds: 10 });
    expect(r.details).toMatchObject({ status: "ok", reply: "by id", sessionKey: key });
    await settle(key);
  });

  it("an unknown sessionId → Session not found (ref §8 17)", async () => {
    setConfigOverride(baseConfig());
    const id = "0b0b0b0b-1111-4222-8333-444455556666";
    const r = await invoke("sessions_send", { sessionKey: id, message: "hi" });
    expect(r.details).toMatchObject({
      status: "error",
      error: `Session not found: ${id} (use the full sessionKey from sessions_list)`,
      runId: expect.any(String),
    });
  });
});

describe("sessions_send: enqueue vs wait", () => {
  it("wait mode: ok with that run's reply; provenance and agent-to-agent context reach the primary run (ref §8 19)", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "done"));
    const requester = `agent:main:discord:group:${uniq("req")}`;
    const target = `agent:main:${uniq("tgt")}`;
    const r = await invoke(
      "sessions_send",
      { sessionKey: target, message: "do the thing", timeoutSeconds: 10 },
      { sessionKey: requester },
    );
    expect(r.details).toEqual({
      runId: expect.any(String),
      status: "ok",
      reply: "done",
      sessionKey: target,
      delivery: { status: "none", mode: "announce" },
    });
    expect(fakes.model[0].system).toContain(
      `Agent-to-agent message context:\nAgent 1 (requester) session: ${requester}.\nAgent 1 (requester) channel: discord.\nAgent 2 (target) session: ${target}.`,
    );
    const hist = await call("GET", `/v1/sessions/${enc(target)}/history`);
    expect(hist.json.messages[0]).toMatchObject({
      role: "user",
      content: [{ type: "text", text: "do the thing" }],
      provenance: {
        kind: "inter_session",
        sourceSessionKey: requester,
        sourceChannel: "discord",
        sourceTool: "sessions_send",
      },
    });
    const run = await call("GET", `/v1/runs/${r.details.runId}`);
    expect(run.json).toMatchObject({ status: "ok", reply: "done", sessionKey: target });
    await settle(target);
  });

  it("timeout: the wait ends, the run continues, and the ping-pong and announce still happen (#45926)", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 1 } } }));
    const gate = deferred<string>();
    const fakes = installFakes((r) =>
      r.kind === "primary" ? gate.promise : r.kind === "turn" ? "pong" : "announced late",
    );
    const requester = `agent:main:discord:group:${uniq("req")}`;
    const target = `agent:main:discord:group:${uniq("tgt")}`;
    const r = await invoke(
      "sessions_send",
      { sessionKey: target, message: "slow one", timeoutSeconds: 1 },
      { sessionKey: requester },
    );
    expect(r.details).toMatchObject({ runId: expect.any(String), status: "timeout", sessionKey: target });
    expect(r.details.error).toContain("the run continues");
    const runId = r.details.runId;
    expect((await call("GET", `/v1/runs/${runId}`)).json.status).toBe("running");

    gate.resolve("finally");
    // A reconnecting caller waits on the same run id and gets that run's reply.
    const waited = await call("GET", `/v1/runs/${runId}/wait?timeoutMs=5000`);
    expect(waited.json).toMatchObject({ runId, status: "ok", reply: "finally" });
    const flow = await doneFlow(target);
    expect(flow).toMatchObject({ outcome: "announced", roundOneReply: "finally" });
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "announce"]);
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["announced late"]));
  });

  it("model error → {status: error, error}", async () => {
    setConfigOverride(baseConfig());
    installFakes(() => new Error("quota exceeded"));
    const target = `agent:main:${uniq("tgt")}`;
    const r = await invoke("sessions_send", { sessionKey: target, message: "x", timeoutSeconds: 10 });
    expect(r.details).toMatchObject({ runId: expect.any(String), status: "error", sessionKey: target });
    expect(r.details.error).toContain("quota exceeded");
    await settle(target);
  });

  it("stale-reply protection: an older assistant reply is never returned as this run's reply (ref §8 26)", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    let calls = 0;
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : calls++ === 0 ? "old answer" : ""));
    const target = `agent:main:${uniq("tgt")}`;
    expect((await sendAndWait(target, "earlier question")).reply).toBe("old answer");
    const r = await invoke("sessions_send", { sessionKey: target, message: "new question", timeoutSeconds: 10 });
    expect(r.details).toEqual({
      runId: expect.any(String),
      status: "ok",
      sessionKey: target,
      delivery: { status: "none", mode: "announce" },
    });
    expect(r.details.reply).toBeUndefined();
    await settle(target);
  });

  it("idempotent retries: the same idempotencyKey returns the same run; one message, one flow", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "once"));
    const target = `agent:main:${uniq("tgt")}`;
    const a = await invoke("sessions_send", {
      sessionKey: target,
      message: "charge card",
      timeoutSeconds: 0,
      idempotencyKey: "op-1",
    });
    const b = await invoke("sessions_send", {
      sessionKey: target,
      message: "charge card",
      timeoutSeconds: 10,
      idempotency_key: "op-1",
    });
    expect(b.details).toMatchObject({ runId: a.details.runId, status: "ok", reply: "once" });
    await doneFlow(target);
    expect(fakes.model.filter((m) => m.kind === "primary")).toHaveLength(1);
    expect(await flowsOf(target)).toHaveLength(1);
    const hist = await call("GET", `/v1/sessions/${enc(target)}/history`);
    expect(
      hist.json.messages.filter((m: any) => m.role === "user" && m.content[0].text === "charge card"),
    ).toHaveLength(1);
    // The key is scoped to the requester: another requester with the same key sends its own message.
    const other = await invoke(
      "sessions_send",
      { sessionKey: target, message: "charge card", timeoutSeconds: 0, idempotencyKey: "op-1" },
      { sessionKey: target },
    );
    expect(other.details.runId).not.toBe(a.details.runId);
    await settle(target);
  });

  it("inter-session turns never overwrite the target's external delivery route (#54441)", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } }, channels: {} }));
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "ok"));
    const target = `agent:main:${uniq("tgt")}`;
    await sendAndWait(target, "from whatsapp", { channel: "whatsapp", to: "+15550001" });
    await invoke(
      "sessions_send",
      { sessionKey: target, message: "from another agent", timeoutSeconds: 10 },
      { sessionKey: "agent:main:discord:group:elsewhere" },
    );
    const row = await call("GET", `/v1/sessions/${enc(target)}`);
    expect(row.json).toMatchObject({ lastChannel: "whatsapp", lastTo: "+15550001" });
    await settle(target);
  });

  it("a burst of 60 concurrent fire-and-forget sends: all run once, in acceptance order (the 1,000-send bar is measured by npm run bench)", async () => {
    setConfigOverride(
      baseConfig({
        session: { agentToAgent: { maxPingPongTurns: 0 } },
        agents: { defaults: { model: "builtin/echo" } },
      }),
    );
    const target = `agent:main:${uniq("burst")}`;
    const N = 60;
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        invoke("sessions_send", { sessionKey: target, message: `m${i}`, timeoutSeconds: 0 }),
      ),
    );
    expect(results.every((r) => r.details.status === "accepted")).toBe(true);
    const last = results.map((r) => r.details.runId);
    await until(async () => {
      const page = await call("GET", `/v1/sessions/${enc(target)}/history?limit=1000`);
      const users = page.json.messages.filter((m: any) => m.role === "user" && m.content[0].text.startsWith("m"));
      expect(users).toHaveLength(N);
    }, 20_000);
    // A run's user message enters the transcript when the run starts; the last run may still be
    // streaming its reply when the 60th message is seen, so wait for every run to end.
    await until(async () => {
      const runs = await Promise.all(last.map((id) => call("GET", `/v1/runs/${id}`)));
      expect(runs.map((r) => r.json.status)).toEqual(last.map(() => "ok"));
    }, 20_000);
    // Transcript order = the order the object accepted the sends (no loss, no duplicates).
    const page = await call("GET", `/v1/sessions/${enc(target)}/history?limit=1000`);
    const texts = page.json.messages
      .filter((m: any) => m.role === "user" && /^m\d+$/.test(m.content[0].text))
      .map((m: any) => m.content[0].text);
    expect(new Set(texts).size).toBe(N);
    const order = await runInDurableObject(sessionStub(target), async (_o, state) => ({
      accepted: state.storage.sql
        .exec<{ id: string }>("SELECT id FROM runs WHERE kind = 'send' ORDER BY qseq")
        .toArray()
        .map((r) => r.id),
      transcript: state.storage.sql
        .exec<{ run_id: string }>(
          "SELECT m.run_id FROM messages m JOIN runs r ON r.id = m.run_id WHERE m.role = 'user' AND r.kind = 'send' ORDER BY m.seq",
        )
        .toArray()
        .map((r) => r.run_id),
    }));
    expect(order.transcript).toEqual(order.accepted);
    expect(new Set(order.accepted)).toEqual(new Set(last));
    await settle(target);
  });
});

describe("sessions_send: delivery.status says what happens to the announce", () => {
  it("pending when the target has a route to a configured channel (and the announce is posted); none without a route or without a webhook (and nothing is posted)", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? `announce from ${r.session}` : "ok"));
    const routed = `agent:main:${uniq("routed")}`;
    await sendAndWait(routed, "hello", { channel: "discord", to: "channel:1" });
    const byKey = `agent:main:discord:group:${uniq("g")}`; // the key names a configured channel
    const noRoute = `agent:main:${uniq("noroute")}`;
    const noWebhook = `agent:main:slack:group:${uniq("g")}`; // slack has no webhook configured
    const results = await Promise.all(
      [routed, byKey, noRoute, noWebhook].map((k, i) =>
        invoke("sessions_send", { sessionKey: k, message: "m", timeoutSeconds: i % 2 === 0 ? 10 : 0 }),
      ),
    );
    expect(results.map((r) => r.details.delivery)).toEqual([
      { status: "pending", mode: "announce" },
      { status: "pending", mode: "announce" },
      { status: "none", mode: "announce" },
      { status: "none", mode: "announce" },
    ]);
    for (const k of [routed, byKey, noRoute, noWebhook]) await settle(k);
    await until(async () =>
      expect(fakes.hooks.map((h) => h.body.message).sort()).toEqual(
        [`announce from ${routed}`, `announce from ${byKey}`].sort(),
      ),
    );
  });
});

describe("sessions_send: announce routing (ref §8 22, 27–29)", () => {
  it("the announce goes to the route recorded on the target (accountId kept, threadId stringified)", async () => {
    setConfigOverride(
      baseConfig({
        session: { agentToAgent: { maxPingPongTurns: 0 } },
        channels: { whatsapp: { webhookUrl: `${HOOK_BASE}/wa` } },
      }),
    );
    const fakes = installFakes((r) => (r.kind === "announce" ? "heads up" : r.kind === "plain" ? "hi" : "ok"));
    const target = `agent:main:whatsapp:direct:${uniq("peer")}`;
    await sendAndWait(target, "hello", { channel: "whatsapp", to: "+4912345", accountId: "work", threadId: 99 });
    await invoke("sessions_send", { sessionKey: target, message: "ping", timeoutSeconds: 0 });
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.hooks[0].body).toMatchObject({
      channel: "whatsapp",
      to: "+4912345",
      accountId: "work",
      threadId: "99",
      message: "heads up",
      kind: "announce",
    });
    await settle(target);
  });

  it("without a recorded route, a group key names its target; a topic key carries its threadId", async () => {
    setConfigOverride(
      baseConfig({
        session: { agentToAgent: { maxPingPongTurns: 0 } },
        channels: {
          telegram: { outbound: { url: `${HOOK_BASE}/tg` } },
          discord: { outbound: { url: `${HOOK_BASE}/dc` } },
        },
      }),
    );
    const fakes = installFakes((r) => (r.kind === "announce" ? "news" : "ok"));
    const dev = `agent:main:discord:group:${uniq("dev")}`;
    await invoke("sessions_send", { sessionKey: dev, message: "ping", timeoutSeconds: 0 });
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.hooks[0].body).toEqual(
      expect.objectContaining({ channel: "discord", to: `group:${dev.split(":").pop()}` }),
    );
    expect("threadId" in fakes.hooks[0].body).toBe(false);

    const topic = `agent:main:telegram:group:-100${++n}:topic:99`;
    await invoke("sessions_send", { sessionKey: topic, message: "ping", timeoutSeconds: 0 });
    await until(async () => expect(fakes.hooks).toHaveLength(2));
    expect(fakes.hooks[1].body).toMatchObject({ channel: "telegram", to: `group:-100${n}`, threadId: "99" });
    await settle(dev);
    await settle(topic);
  });

  it("a target with no route at all: the announce is a visible dead letter, not a silent drop", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "anyone?" : "ok"));
    const target = `agent:main:${uniq("routeless")}`;
    await invoke("sessions_send", { sessionKey: target, message: "ping", timeoutSeconds: 0 });
    const flow = await doneFlow(target);
    expect(flow.outcome).toBe("announced");
    const dead = await until(async () => {
      const d = await deliveriesOf(target, "dead");
      expect(d).toHaveLength(1);
      return d;
    });
    expect(dead[0]).toMatchObject({ kind: "announce", channel: "unknown", payload: { message: "anyone?" } });
    expect(fakes.hooks).toHaveLength(0);
  });

  it("an agent token may send as its own sessions only, and the send is recorded under that requester", async () => {
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "ok"));
    const r = await invoke(
      "sessions_send",
      { sessionKey: "agent:main:main", message: "hi", timeoutSeconds: 10 },
      { token: RESEARCH_TOKEN },
    );
    expect(r.details).toMatchObject({ status: "ok", sessionKey: "agent:main:main" });
    const hist = await call("GET", `/v1/sessions/${enc("agent:main:main")}/history?limit=5`);
    expect(hist.json.messages.filter((m: any) => m.role === "user").at(-1).provenance.sourceSessionKey).toBe(
      "agent:research:main",
    );
    await settle("agent:main:main");
  });
});

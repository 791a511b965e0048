import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { verifyWebhookSignature } from "../../src/channels/signed-webhook";
import { setConfigOverride } from "../../src/config/load";
import { STEP_WAIT_MS } from "../../src/send/a2a-flow";
import { LEASE_MS } from "../../src/session/run-types";
import { SessionObject } from "../../src/session/session-object";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import {
  baseConfig,
  deferred,
  deliveriesOf,
  doneFlow,
  flowsOf,
  installFakes,
  type ModelRequest,
  until,
} from "../helpers/scripted";

let n = 0;
function keys() {
  n++;
  return { req: `agent:main:discord:group:req-${n}`, target: `agent:main:discord:group:target-${n}` };
}

describe("agent-to-agent flow", () => {
  it("the worked example: the first round, 2 ping-pong turns, announce delivered to the target's webhook", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r: ModelRequest) => {
      if (r.kind === "primary") return "initial";
      if (r.kind === "turn") return `pong-${r.turn}`;
      if (r.kind === "announce") return "announce now";
      return "plain";
    });
    const res = await invoke(
      "sessions_send",
      { sessionKey: k.target, message: "ping", timeoutSeconds: 10 },
      { sessionKey: k.req },
    );
    expect(res.status).toBe(200);
    expect(res.details).toEqual({
      runId: expect.any(String),
      status: "ok",
      reply: "initial",
      sessionKey: k.target,
      delivery: { status: "pending", mode: "announce" },
    });

    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("announced");
    await until(async () => expect(fakes.hooks.length).toBe(1));

    // 4 model calls: primary in target, turn 1 in requester, turn 2 in target, announce in target.
    expect(fakes.model.map((m) => [m.session, m.kind, m.turn ?? null, m.lastUser])).toEqual([
      [k.target, "primary", null, "ping"],
      [k.req, "turn", 1, "initial"],
      [k.target, "turn", 2, "pong-1"],
      [k.target, "announce", null, "Agent-to-agent announce step."],
    ]);
    const announce = fakes.model[3].system;
    expect(announce).toContain("Original request: ping");
    expect(announce).toContain("Round 1 reply: initial");
    expect(announce).toContain("Latest reply: pong-2");
    expect(announce).toContain(`Agent 2 (target) channel: discord.`);
    expect(fakes.model[1].system).toContain("Current agent: Agent 1 (requester).\nTurn 1 of 2.");
    expect(fakes.model[2].system).toContain("Current agent: Agent 2 (target).\nTurn 2 of 2.");

    const hook = fakes.hooks[0];
    expect(hook.url).toBe("https://hooks.test/discord");
    expect(hook.body).toEqual({
      channel: "discord",
      to: `group:target-${n}`,
      message: "announce now",
      sessionKey: k.target,
      kind: "announce",
      idempotencyKey: `a2a:${flow.id}:announce`,
    });
    expect(hook.headers["idempotency-key"]).toBe(`a2a:${flow.id}:announce`);
    expect(
      await verifyWebhookSignature(
        "hook-secret",
        hook.headers["x-switchboard-timestamp"],
        hook.rawBody,
        hook.headers["x-switchboard-signature"],
      ),
    ).toBe(true);

    const delivered = await until(async () => {
      const d = await deliveriesOf(k.target, "delivered");
      expect(d).toHaveLength(1);
      return d;
    });
    expect(delivered[0]).toMatchObject({ kind: "announce", status: "delivered", attempts: 1 });

    // Both transcripts hold the inter-session turns with provenance; the target's route was not touched.
    const hist = await call("GET", `/v1/sessions/${enc(k.target)}/history?limit=50`);
    const users = hist.json.messages.filter((m: any) => m.role === "user");
    expect(users[0]).toMatchObject({
      provenance: { kind: "inter_session", sourceSessionKey: k.req, sourceTool: "sessions_send" },
    });
    // The announce step's prompt is ours, not a turn of the conversation: shown only with includeTools.
    expect(users.map((u: any) => u.content[0].text)).toEqual(["ping", "pong-1"]);
    const withInternal = await call("GET", `/v1/sessions/${enc(k.target)}/history?limit=50&includeTools=true`);
    expect(withInternal.json.messages.filter((m: any) => m.role === "user").map((u: any) => u.content[0].text)).toEqual(
      ["ping", "pong-1", "Agent-to-agent announce step."],
    );
    const row = await call("GET", `/v1/sessions/${enc(k.target)}`);
    expect(row.json.lastChannel).toBeUndefined();
  });

  it("fire-and-forget returns accepted at once and the flow still makes 4 runs and one announce", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "primary"
        ? "initial"
        : r.kind === "turn"
          ? `pong-${r.turn}`
          : r.kind === "announce"
            ? "announce now"
            : "x",
    );
    const res = await invoke(
      "sessions_send",
      { sessionKey: k.target, message: "ping", timeoutSeconds: 0 },
      { sessionKey: k.req },
    );
    expect(res.details).toEqual({
      runId: expect.any(String),
      status: "accepted",
      sessionKey: k.target,
      delivery: { status: "pending", mode: "announce" },
    });
    await doneFlow(k.target);
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
  });

  // REPLY_SKIP at every position: the primary reply, the requester's turn, the target's turn.
  it.each([
    { at: "primary", script: { primary: "REPLY_SKIP" }, kinds: ["primary", "announce"], latest: "(not available)." },
    {
      at: "turn 1",
      script: { turn1: "  REPLY_SKIP  " },
      kinds: ["primary", "turn", "announce"],
      latest: "(not available).",
    },
    { at: "turn 2", script: { turn2: "REPLY_SKIP" }, kinds: ["primary", "turn", "turn", "announce"], latest: "pong-1" },
  ])("REPLY_SKIP at $at ends the ping-pong; the announce still runs", async ({ script, kinds, latest }) => {
    const k = keys();
    setConfigOverride(baseConfig());
    const sc = script as unknown as Record<string, string>;
    const fakes = installFakes((r) => {
      if (r.kind === "primary") return sc.primary ?? "initial";
      if (r.kind === "turn") return sc[`turn${r.turn}`] ?? `pong-${r.turn}`;
      return "announce now";
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    expect(fakes.model.map((m) => m.kind)).toEqual(kinds);
    expect(fakes.model.at(-1)!.system).toContain(`Latest reply: ${latest}`);
    expect(flow.outcome).toBe("announced");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
  });

  it("ANNOUNCE_SKIP in the announce step is silent: nothing delivered, nothing queued", async () => {
    const k = keys();
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? " ANNOUNCE_SKIP\n" : "initial"));
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("announce_skipped");
    expect(fakes.hooks).toHaveLength(0);
    expect(await deliveriesOf(k.target)).toHaveLength(0);
  });

  it("ANNOUNCE_SKIP as a ping-pong turn is ordinary text (only the announce step treats it as silence)", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "turn" && r.turn === 1
        ? "ANNOUNCE_SKIP"
        : r.kind === "announce"
          ? "posted"
          : r.kind === "turn"
            ? "pong-2"
            : "initial",
    );
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await doneFlow(k.target);
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
    expect(fakes.model[2].lastUser).toBe("ANNOUNCE_SKIP");
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["posted"]));
  });

  it("an announce reply of REPLY_SKIP is not silence (only ANNOUNCE_SKIP is) and is delivered", async () => {
    const k = keys();
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "REPLY_SKIP" : "initial"));
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await doneFlow(k.target);
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["REPLY_SKIP"]));
  });

  it("maxPingPongTurns 0: primary then announce, no turns", async () => {
    const k = keys();
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "done" : "initial"));
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await doneFlow(k.target);
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "announce"]);
    expect(fakes.model[1].system).toContain("Round 1 reply: initial\nLatest reply: (not available).");
  });

  it("maxPingPongTurns 5: five alternating turns (requester first), then the announce", async () => {
    const k = keys();
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 5 } } }));
    const fakes = installFakes((r) =>
      r.kind === "turn" ? `pong-${r.turn}` : r.kind === "announce" ? "fin" : "initial",
    );
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    expect(fakes.model.map((m) => [m.kind, m.turn ?? null, m.session === k.req ? "req" : "target"])).toEqual([
      ["primary", null, "target"],
      ["turn", 1, "req"],
      ["turn", 2, "target"],
      ["turn", 3, "req"],
      ["turn", 4, "target"],
      ["turn", 5, "req"],
      ["announce", null, "target"],
    ]);
    expect(fakes.model[6].system).toContain("Latest reply: pong-5");
    expect(flow.turns.map((t: any) => t.reply)).toEqual(["pong-1", "pong-2", "pong-3", "pong-4", "pong-5"]);
  });

  it("the default maxPingPongTurns is 5", async () => {
    const k = keys();
    const cfg = baseConfig();
    delete cfg.session.agentToAgent;
    setConfigOverride(cfg);
    const fakes = installFakes((r) => (r.kind === "turn" ? `pong-${r.turn}` : "x"));
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await doneFlow(k.target);
    expect(fakes.model.filter((m) => m.kind === "turn")).toHaveLength(5);
  });

  it("no ping-pong with oneself (`main` canonicalised), but the announce step still runs", async () => {
    setConfigOverride(baseConfig({ channels: {} }));
    const fakes = installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "self reply"));
    const me = "agent:main:main";
    const res = await invoke(
      "sessions_send",
      { sessionKey: "main", message: "note to self", timeoutSeconds: 10 },
      { sessionKey: me },
    );
    expect(res.details).toMatchObject({ status: "ok", reply: "self reply", sessionKey: me });
    const flows = await until(async () => {
      const f = (await flowsOf(me)).filter((x) => x.originalMessage === "note to self");
      expect(f[0]?.step).toBe("done");
      return f;
    });
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "announce"]);
    expect(flows[0].turns).toEqual([]);
  });

  it("an error in a ping-pong turn stops the ping-pong; the announce still runs", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "turn" ? new Error("provider exploded") : r.kind === "announce" ? "after error" : "initial",
    );
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "announce"]);
    expect(flow.turns[0]).toMatchObject({ turn: 1, status: "error" });
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["after error"]));
  });

  it("a primary run that fails starts no ping-pong and no announce", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes(() => new Error("model down"));
    const res = await invoke(
      "sessions_send",
      { sessionKey: k.target, message: "ping", timeoutSeconds: 10 },
      { sessionKey: k.req },
    );
    expect(res.details).toMatchObject({ status: "error", sessionKey: k.target });
    expect(res.details.error).toContain("model down");
    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("no_round_one_reply");
    expect(fakes.model).toHaveLength(1);
    expect(fakes.hooks).toHaveLength(0);
  });

  // Eviction in the middle of every step: the step's run is lost with its executor, re-queued by its
  // lease, and the flow goes on from the persisted state — every step once in the transcripts, one delivery.
  it.each([
    { step: "primary", kind: "primary", turn: undefined, side: "target" },
    { step: "turn 1 (requester)", kind: "turn", turn: 1, side: "req" },
    { step: "turn 2 (target)", kind: "turn", turn: 2, side: "target" },
    { step: "announce", kind: "announce", turn: undefined, side: "target" },
  ])("an eviction during the $step step loses nothing and repeats nothing", async ({ kind, turn, side }) => {
    const k = keys();
    setConfigOverride(baseConfig());
    let hung = false;
    const fakes = installFakes((r) => {
      if (!hung && r.kind === kind && r.turn === turn) {
        hung = true;
        return new Promise<string>(() => {}); // the executor dies with this call
      }
      return r.kind === "primary" ? "initial" : r.kind === "turn" ? `pong-${r.turn}` : "announce now";
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(hung).toBe(true));
    // Both sessions restart; the one running the step loses its executor mid-call.
    await crash(sessionStub(k.req), sessionStub(k.target));
    // Nothing runs by itself now: the run is 'running' with no executor until its lease expires.
    await advance(side === "req" ? k.req : k.target, LEASE_MS);
    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("announced");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(flow.turns.map((t: any) => t.reply)).toEqual(["pong-1", "pong-2"]);
    const texts = async (key: string) =>
      (await call("GET", `/v1/sessions/${enc(key)}/history?limit=50`)).json.messages
        .filter((m: any) => m.role === "user")
        .map((m: any) => m.content[0].text);
    expect(await texts(k.target)).toEqual(["ping", "pong-1"]);
    expect(await texts(k.req)).toEqual(["initial"]);
    expect(await deliveriesOf(k.target)).toHaveLength(1);
  });

  it("an eviction between steps (after a run ended, before the next step was dispatched) is resumed by the alarm", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "primary" ? "initial" : r.kind === "turn" ? `pong-${r.turn}` : "announce now",
    );
    // The first dispatch of turn 1 dies with the instance before it reaches the requester.
    const realEnqueue = SessionObject.prototype.enqueue;
    let failed = 0;
    vi.spyOn(SessionObject.prototype, "enqueue").mockImplementation(function (this: SessionObject, req) {
      if (req.input.kind === "a2a_turn" && failed === 0) {
        failed++;
        return Promise.reject(new Error("instance evicted"));
      }
      return realEnqueue.call(this, req);
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(failed).toBe(1));
    await evict(sessionStub(k.req), sessionStub(k.target));
    expect((await flowsOf(k.target))[0]).toMatchObject({ step: "turn", turn: 1 });
    await advance(k.target, STEP_WAIT_MS);
    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("announced");
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
    await until(async () => expect(fakes.hooks).toHaveLength(1));
  });

  it("a crash after the step was queued but before its run id was noted never queues it twice", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "primary" ? "initial" : r.kind === "turn" ? `pong-${r.turn}` : "announce now",
    );
    const realEnqueue = SessionObject.prototype.enqueue;
    let lostAck = 0;
    vi.spyOn(SessionObject.prototype, "enqueue").mockImplementation(async function (this: SessionObject, req) {
      const snap = await realEnqueue.call(this, req);
      if (req.input.kind === "a2a_turn" && lostAck === 0) {
        lostAck++;
        throw new Error("connection lost after enqueue");
      }
      return snap;
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    // The guard/dispatch timer firing later finds the flow finished and does nothing.
    await advance(k.target, STEP_WAIT_MS);
    expect(flow.outcome).toBe("announced");
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
    await until(async () => expect(fakes.hooks).toHaveLength(1));
  });

  it("a lost callback: the target's guard re-checks the step's run by id and moves on; the late callback is ignored", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) =>
      r.kind === "primary" ? "initial" : r.kind === "turn" ? `pong-${r.turn}` : "announce now",
    );
    const realCall = SessionObject.prototype.extensionCall;
    let refused = 0;
    const spy = vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
      this: SessionObject,
      name,
      method,
      arg,
    ) {
      if (method === "stepEnded") {
        refused++;
        return Promise.reject(new Error("target unreachable"));
      }
      return realCall.call(this, name, method, arg);
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(refused).toBeGreaterThan(0));
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn"]);
    await advance(k.target, STEP_WAIT_MS); // the guard
    const flow = await doneFlow(k.target);
    expect(flow.turns.map((t: any) => t.reply)).toEqual(["pong-1", "pong-2"]);
    spy.mockRestore();
    // The requester's callback timer still retries; once through, the target ignores it (stale step).
    await advance(k.req, 10 * 60_000);
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
    expect((await flowsOf(k.target))[0].turns).toHaveLength(2);
  });

  it("a step whose run never ends is given up after its wait (60 s + one lease) and the flow moves on", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes((r) => {
      if (r.kind === "turn" && r.turn === 1) return new Promise<string>(() => {});
      return r.kind === "primary" ? "initial" : "announce now";
    });
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn"]));
    await advance(k.target, STEP_WAIT_MS);
    expect((await flowsOf(k.target))[0]).toMatchObject({ step: "turn", guardChecks: 1 });
    await advance(k.target, LEASE_MS);
    const flow = await doneFlow(k.target);
    expect(flow.turns[0]).toMatchObject({ turn: 1, status: "timeout" });
    expect(fakes.model.at(-1)!.kind).toBe("announce");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
  });

  it("a target deleted mid-flow: the requester's report is acknowledged (not retried forever) and nothing is announced", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const gate = deferred<string>();
    const fakes = installFakes((r) =>
      r.kind === "turn" && r.turn === 1 ? gate.promise : r.kind === "primary" ? "initial" : "announce now",
    );
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn"]));
    expect((await call("DELETE", `/v1/sessions/${enc(k.target)}`)).status).toBe(200);
    gate.resolve("pong-1");
    await until(async () => {
      const pending = await runInDurableObject(sessionStub(k.req), async (_o, st) =>
        st.storage.sql.exec("SELECT * FROM timers WHERE kind = 'a2a_notify'").toArray(),
      );
      expect(pending).toEqual([]);
    });
    expect(fakes.model).toHaveLength(2);
    expect(fakes.hooks).toHaveLength(0);
  });

  it("a requester deleted mid-flow is not re-created by its ping-pong turn: the ping-pong ends and the target still announces", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const gate = deferred<string>();
    const fakes = installFakes((r) =>
      r.kind === "primary" ? gate.promise : r.kind === "announce" ? "announce now" : "plain",
    );
    await sendAndWait(k.req, "hello");
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    await until(async () => expect(fakes.model.map((m) => m.kind)).toContain("primary"));
    expect((await call("DELETE", `/v1/sessions/${enc(k.req)}`)).status).toBe(200);
    gate.resolve("initial");

    const flow = await doneFlow(k.target);
    expect(flow.turns).toEqual([expect.objectContaining({ turn: 1, sessionKey: k.req, status: "error" })]);
    expect(flow.outcome).toBe("announced");
    expect(fakes.model.map((m) => m.kind).filter((kind) => kind !== "plain")).toEqual(["primary", "announce"]);
    expect(await sessionStub(k.req).getMeta()).toBeNull();
    expect((await call("GET", `/v1/sessions/${enc(k.req)}`)).status).toBe(404);
  });
});

import { describe, expect, it } from "vitest";
import { verifyWebhookSignature } from "../../src/channels/signed-webhook";
import { setConfigOverride } from "../../src/config/load";
import { call, enc, invoke } from "../helpers/http";
import {
  baseConfig,
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
});

import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call, enc, invoke, RESEARCH_TOKEN, sendAndWait } from "../helpers/http";
import {
  baseConfig,
  deliveriesOf,
  doneFlow,
  HOOK_BASE,
  installFakes,
  settleFlows as settle,
  until,
} from "../helpers/scripted";

let n = 0;
const uniq = (base: string) => `${base}-${++n}`;

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

describe("sessions_send: announce routing", () => {
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

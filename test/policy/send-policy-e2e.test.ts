import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call, enc, flushIndex, invoke, sendAndWait } from "../helpers/http";
import { baseConfig, deferred, deliveriesOf, flowsOf, HOOK_BASE, installFakes, until } from "../helpers/scripted";

let n = 0;
const uniq = (base: string) => `${base}-${++n}`;
const BLOCKED = { runId: expect.any(String), status: "error", error: "send blocked by session policy" };

function policyConfig(sendPolicy?: unknown, extra: Record<string, any> = {}) {
  setConfigOverride(
    baseConfig({
      session: { agentToAgent: { maxPingPongTurns: 0 }, ...(sendPolicy ? { sendPolicy } : {}) },
      channels: {
        telegram: { outbound: { url: `${HOOK_BASE}/tg` } },
        discord: { outbound: { url: `${HOOK_BASE}/dc` } },
      },
      ...extra,
    }),
  );
}

async function send(target: string, message = "hi") {
  return (await invoke("sessions_send", { sessionKey: target, message, timeoutSeconds: 10 })).details;
}

async function settle(target: string) {
  await until(async () => {
    const f = await flowsOf(target);
    expect(f.every((x) => x.step === "done")).toBe(true);
  });
}

describe("send policy rules on sessions_send", () => {
  it("no policy → allow", async () => {
    policyConfig();
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "fine"));
    const target = `agent:main:discord:group:${uniq("open")}`;
    expect(await send(target)).toMatchObject({ status: "ok", reply: "fine" });
    await settle(target);
  });

  it("a channel + chatType rule denies a matching session, with OpenClaw's result; nothing runs", async () => {
    policyConfig({ rules: [{ match: { channel: "discord", chatType: "group" }, action: "deny" }], default: "allow" });
    const fakes = installFakes(() => "never");
    const target = `agent:main:discord:group:${uniq("blocked")}`;
    expect(await send(target)).toEqual({ ...BLOCKED, sessionKey: target });
    expect(fakes.model).toHaveLength(0);
    // A direct chat on the same channel is not matched by the group rule.
    const dm = `agent:main:discord:direct:${uniq("peer")}`;
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "dm ok"));
    expect(await send(dm)).toMatchObject({ status: "ok", reply: "dm ok" });
    await settle(dm);
  });

  it("keyPrefix `cron:` denies cron sessions (also in their agent-prefixed form)", async () => {
    policyConfig({ rules: [{ match: { keyPrefix: "cron:" }, action: "deny" }] });
    installFakes(() => "never");
    expect(await send("cron:job-1")).toEqual({ ...BLOCKED, sessionKey: "agent:main:cron:job-1" });
  });

  it("rawKeyPrefix matches only the full key it names", async () => {
    policyConfig({ rules: [{ match: { rawKeyPrefix: "agent:main:discord:" }, action: "deny" }] });
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "tg ok"));
    expect(await send(`agent:main:discord:group:${uniq("x")}`)).toMatchObject(BLOCKED);
    const tg = `agent:main:telegram:group:${uniq("x")}`;
    expect(await send(tg)).toMatchObject({ status: "ok", reply: "tg ok" });
    await settle(tg);
  });

  it("default deny with an allow rule: only the allowed channel gets through (deny short-circuits allow)", async () => {
    policyConfig({
      default: "deny",
      rules: [
        { match: { channel: "telegram" }, action: "allow" },
        { match: { keyPrefix: "telegram:group:quiet" }, action: "deny" },
      ],
    });
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "allowed"));
    const ok = `agent:main:telegram:group:${uniq("loud")}`;
    expect(await send(ok)).toMatchObject({ status: "ok" });
    expect(await send(`agent:main:telegram:group:quiet-${++n}`)).toMatchObject(BLOCKED);
    expect(await send(`agent:main:${uniq("plain")}`)).toMatchObject(BLOCKED);
    await settle(ok);
  });
});

describe("per-session override: PATCH and the owner's /send", () => {
  it("PATCH sendPolicy deny blocks sends and shows in sessions_list; null inherits again; an override beats the rules", async () => {
    policyConfig({ rules: [{ match: { channel: "discord" }, action: "deny" }] });
    installFakes((r) => (r.kind === "announce" ? "ANNOUNCE_SKIP" : "hello"));
    const target = `agent:main:telegram:group:${uniq("patched")}`;
    const patched = await call("PATCH", `/v1/sessions/${enc(target)}`, { sendPolicy: "DENY" });
    expect(patched.status).toBe(200);
    expect(patched.json.sendPolicy).toBe("deny");
    expect(await send(target)).toEqual({ ...BLOCKED, sessionKey: target });
    await flushIndex(target);
    const list = await invoke("sessions_list", { limit: 200 }, { sessionKey: "agent:main:main" });
    expect(list.details.sessions.find((r: any) => r.key === target)).toMatchObject({ sendPolicy: "deny" });

    expect((await call("PATCH", `/v1/sessions/${enc(target)}`, { sendPolicy: null })).json.sendPolicy).toBeUndefined();
    expect(await send(target)).toMatchObject({ status: "ok", reply: "hello" });

    // An explicit allow wins over a deny rule.
    const dc = `agent:main:discord:group:${uniq("override")}`;
    expect(await send(dc)).toMatchObject(BLOCKED);
    await call("PATCH", `/v1/sessions/${enc(dc)}`, { sendPolicy: "allow" });
    expect(await send(dc)).toMatchObject({ status: "ok" });
    await settle(target);
    await settle(dc);
  });

  it("PATCH with an invalid sendPolicy → 400 with OpenClaw's text, nothing changes", async () => {
    policyConfig();
    const target = `agent:main:${uniq("bad-patch")}`;
    const r = await call("PATCH", `/v1/sessions/${enc(target)}`, { sendPolicy: "maybe" });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      ok: false,
      error: { type: "invalid_request", message: 'invalid sendPolicy (use "allow"|"deny")' },
    });
  });

  it("the owner's /send off|on|inherit: OpenClaw's replies, the override is set, no model call", async () => {
    policyConfig();
    const fakes = installFakes(() => "model reply");
    const key = `agent:main:telegram:direct:${uniq("owner")}`;
    const route = { channel: "telegram", to: "chat-1", senderIsOwner: true };
    expect((await sendAndWait(key, "/send off", route)).reply).toBe("⚙️ Send policy set to off.");
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("deny");
    expect((await sendAndWait(key, "  /SEND   on ", route)).reply).toBe("⚙️ Send policy set to on.");
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBe("allow");
    expect((await sendAndWait(key, "/send inherit", route)).reply).toBe("⚙️ Send policy set to inherit.");
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json.sendPolicy).toBeUndefined();
    expect((await sendAndWait(key, "/send maybe", route)).reply).toBe("⚙️ Usage: /send on|off|inherit");
    expect((await sendAndWait(key, "/send", route)).reply).toBe("⚙️ Usage: /send on|off|inherit");
    expect(fakes.model).toHaveLength(0);
    // Not a standalone command: an ordinary message for the model.
    expect((await sendAndWait(key, "/sender please", route)).reply).toBe("model reply");
    expect(fakes.model).toHaveLength(1);
  });

  it("/send off blocks deliver:true replies at the outbox (recorded as blocked, never posted); /send on lets them out", async () => {
    policyConfig();
    const fakes = installFakes(() => "a reply");
    const key = `agent:main:telegram:direct:${uniq("muted")}`;
    const route = { channel: "telegram", to: "chat-9", deliver: true, senderIsOwner: true };
    await sendAndWait(key, "/send off", route);
    await sendAndWait(key, "say something", route);
    const blocked = await until(async () => {
      const b = await deliveriesOf(key, "blocked");
      expect(b.length).toBe(2);
      return b;
    });
    expect(blocked.map((d) => [d.payload.message, d.lastError, d.attempts])).toEqual([
      ["a reply", "send blocked by session policy", 0],
      ["⚙️ Send policy set to off.", "send blocked by session policy", 0],
    ]);
    expect(fakes.hooks).toHaveLength(0);
    // An operator retry cannot send what the policy still blocks: the row stays blocked, nothing is posted.
    const still = await call("POST", `/v1/sessions/${enc(key)}/deliveries/${blocked[0].id}/retry`);
    expect(still.status).toBe(200);
    expect(still.json).toMatchObject({
      id: blocked[0].id,
      status: "blocked",
      lastError: "send blocked by session policy",
    });
    expect(fakes.hooks).toHaveLength(0);
    await sendAndWait(key, "/send on", route);
    await sendAndWait(key, "now loud", route);
    await until(async () =>
      expect(fakes.hooks.map((h) => h.body.message)).toEqual(["⚙️ Send policy set to on.", "a reply"]),
    );
    // Once the policy allows it, the same retry sends the blocked reply.
    const sent = await call("POST", `/v1/sessions/${enc(key)}/deliveries/${blocked[0].id}/retry`);
    expect(sent.json).toMatchObject({ id: blocked[0].id, status: "delivered" });
    expect(fakes.hooks.map((h) => h.body.message)).toEqual(["⚙️ Send policy set to on.", "a reply", "a reply"]);
  });

  it("a session denied after the send was accepted: the announce is stopped at the outbox chokepoint", async () => {
    policyConfig();
    const gate = deferred<string>();
    const fakes = installFakes((r) => (r.kind === "primary" ? gate.promise : "loud announce"));
    const target = `agent:main:discord:group:${uniq("late-deny")}`;
    const res = await invoke("sessions_send", { sessionKey: target, message: "x", timeoutSeconds: 0 });
    expect(res.details.status).toBe("accepted");
    await until(async () => expect(fakes.model).toHaveLength(1));
    await call("PATCH", `/v1/sessions/${enc(target)}`, { sendPolicy: "deny" });
    gate.resolve("done");
    const flow = await until(async () => {
      const f = await flowsOf(target);
      expect(f[0]?.step).toBe("done");
      return f[0];
    });
    expect(flow).toMatchObject({ outcome: "announced", deliveryStatus: "blocked" });
    expect((await deliveriesOf(target, "blocked"))[0]).toMatchObject({
      kind: "announce",
      payload: { message: "loud announce" },
    });
    expect(fakes.hooks).toHaveLength(0);
  });
});

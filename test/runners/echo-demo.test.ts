import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { deliveriesOf, flowsOf, until } from "../helpers/scripted";
import { announcesIn, settle } from "../helpers/subagents";

/**
 * The shipped default model `builtin/echo` in the follow-up steps (docs/models.md, "The offline model"): a newcomer's
 * first sessions_send and sessions_spawn end after one clear result — no ping-pong of echoed prompts,
 * no "Agent-to-agent announce step." posted to a channel, no announce-step prompt as Notes.
 */
const HOOK = "https://hooks.test/echo";

function echoConfig() {
  setConfigOverride({
    agents: { defaults: { model: "builtin/echo" }, list: [{ id: "main", default: true }, { id: "research" }] },
    tools: { sessions: { visibility: "all" } },
    channels: { discord: { webhookUrl: HOOK }, webchat: { webhookUrl: HOOK } },
  });
  const hooks: any[] = [];
  const original = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: any, init?: any) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.toString() : input.url;
    if (!url.startsWith(HOOK)) return original(input, init);
    hooks.push(JSON.parse(String(init?.body)));
    return new Response("", { status: 200 });
  });
  return hooks;
}

describe("builtin/echo in the follow-up steps", () => {
  it("sessions_send: the reply is the echo, the requester's reply-back turn answers REPLY_SKIP, the announce ANNOUNCE_SKIP — nothing is delivered", async () => {
    const hooks = echoConfig();
    const target = `agent:main:discord:group:echo-${crypto.randomUUID().slice(0, 8)}`;
    const requester = `agent:main:webchat:direct:echo-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(target, "hello", { channel: "discord", to: "group:x" });
    const r = await invoke(
      "sessions_send",
      { sessionKey: target, message: "status?", timeoutSeconds: 10 },
      { sessionKey: requester },
    );
    expect(r.details).toMatchObject({ status: "ok", reply: expect.stringMatching(/status\?$/) });
    const flow = await until(async () => {
      const [f] = await flowsOf(target);
      expect(f?.step).toBe("done");
      return f;
    });
    expect(flow.outcome).toBe("announce_skipped");
    expect(flow.turns).toEqual([
      { turn: 1, sessionKey: requester, runId: expect.any(String), reply: "REPLY_SKIP", status: "ok" },
    ]);
    // The target's only delivery is the reply to its own inbound message ("hello", deliver not set: none).
    expect(await deliveriesOf(target)).toEqual([]);
    expect(hooks).toEqual([]);
  });

  it("sessions_spawn: the requester gets one announce — Status, Result (the echoed task), Stats — and no Notes", async () => {
    const hooks = echoConfig();
    const requester = `agent:main:webchat:direct:spawn-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(requester, "hi", { channel: "webchat", to: "alice" });
    const r = await invoke("sessions_spawn", { task: "count the stars" }, { sessionKey: requester });
    expect(r.details.status).toBe("accepted");
    const child = r.details.childSessionKey as string;
    await settle(child);
    await runDurableObjectAlarm(sessionStub(requester));
    const announces = await announcesIn(requester, child);
    expect(announces).toHaveLength(1);
    const lines = announces[0].text.split("\n");
    expect(lines[0]).toBe("Status: completed successfully");
    expect(lines[1]).toMatch(/^Result: /);
    expect(announces[0].text).toContain("[Subagent Task]: count the stars");
    expect(announces[0].text).not.toContain("Notes:");
    expect(announces[0].text).not.toContain("Sub-agent announce step.");
    expect(lines[lines.length - 1]).toMatch(
      new RegExp(
        `^Stats: runtime \\S+ • tokens \\S+ \\(in \\S+ / out \\S+\\) • sessionKey ${child} • sessionId \\S+ • transcript /v1/sessions/${enc(child)}/transcript.jsonl$`,
      ),
    );
    await until(async () =>
      expect(hooks.filter((h) => h.kind === "subagent_announce").map((h) => h.message)).toEqual([announces[0].text]),
    );
  });
});

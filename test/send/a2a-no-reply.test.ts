import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { isSilentReply } from "../../src/send/control-tokens";
import { invoke } from "../helpers/http";
import { baseConfig, deliveriesOf, flowsOf, installFakes, until } from "../helpers/scripted";

/**
 * NO_REPLY is silence in the agent-to-agent flow (docs/contract.md, "Flows"): never posted to the target's
 * channel by the announce step, never forwarded as the next ping-pong message, and a primary reply of
 * NO_REPLY starts neither (OpenClaw's non-deliverable replies; test/send/a2a-flow.test.ts has the rest).
 */

const uid = () => crypto.randomUUID().slice(0, 8);
function keys() {
  const n = uid();
  return { req: `agent:main:discord:group:nr-req-${n}`, target: `agent:main:discord:group:nr-target-${n}` };
}

async function doneFlow(target: string) {
  return until(async () => {
    const flows = await flowsOf(target);
    expect(flows[0]?.step).toBe("done");
    return flows[0];
  });
}

describe("NO_REPLY in the agent-to-agent flow", () => {
  it.each(["NO_REPLY", " no_reply. ", "NO_REPLY NO_REPLY", "HEARTBEAT_OK"])(
    "an announce step answering %j stays silent: nothing is posted",
    async (silent) => {
      const k = keys();
      setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 0 } } }));
      const fakes = installFakes((r) => (r.kind === "announce" ? silent : "initial"));
      await invoke(
        "sessions_send",
        { sessionKey: k.target, message: "ping", timeoutSeconds: 0 },
        { sessionKey: k.req },
      );
      const flow = await doneFlow(k.target);
      expect(flow.outcome).toBe("announce_skipped");
      expect(fakes.hooks).toHaveLength(0);
      expect(await deliveriesOf(k.target)).toHaveLength(0);
    },
  );

  it("a ping-pong turn answering NO_REPLY ends the exchange: it is not forwarded as the next message", async () => {
    const k = keys();
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 4 } } }));
    const fakes = installFakes((r) =>
      r.kind === "primary" ? "initial" : r.kind === "turn" ? (r.turn === 1 ? "pong-1" : "NO_REPLY") : "announced",
    );
    await invoke("sessions_send", { sessionKey: k.target, message: "ping", timeoutSeconds: 0 }, { sessionKey: k.req });
    const flow = await doneFlow(k.target);
    // Turn 2 (the target) said nothing: no turn 3 hears "NO_REPLY"; the announce quotes the last real reply.
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary", "turn", "turn", "announce"]);
    expect(fakes.model.some((m) => m.lastUser === "NO_REPLY")).toBe(false);
    expect(fakes.model.at(-1)!.system).toContain("Latest reply: pong-1");
    expect(flow.outcome).toBe("announced");
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["announced"]));
  });

  it("a primary reply of NO_REPLY starts no ping-pong and no announce", async () => {
    const k = keys();
    setConfigOverride(baseConfig());
    const fakes = installFakes(() => "NO_REPLY");
    const res = await invoke(
      "sessions_send",
      { sessionKey: k.target, message: "ping", timeoutSeconds: 10 },
      { sessionKey: k.req },
    );
    expect(res.details).toMatchObject({ status: "ok", reply: "NO_REPLY" });
    const flow = await doneFlow(k.target);
    expect(flow.outcome).toBe("no_round_one_reply");
    expect(fakes.model.map((m) => m.kind)).toEqual(["primary"]);
    expect(fakes.hooks).toHaveLength(0);
  });

  it("only a reply that is nothing but the token is silence", () => {
    for (const t of ["NO_REPLY", "no_reply", "  NO_REPLY!  ", "NO_REPLY\nNO_REPLY", "heartbeat_ok"])
      expect(isSilentReply(t), t).toBe(true);
    for (const t of ["NO_REPLY please", "I have NO_REPLY", "ANNOUNCE_SKIP", "REPLY_SKIP", ""])
      expect(isSilentReply(t), t).toBe(false);
  });
});

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { STEP_WAIT_MS } from "../../src/send/a2a-flow";
import { LEASE_MS } from "../../src/session/run-types";
import { SessionObject } from "../../src/session/session-object";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import { baseConfig, deferred, deliveriesOf, doneFlow, flowsOf, installFakes, until } from "../helpers/scripted";

let n = 0;
function keys() {
  n++;
  return { req: `agent:main:discord:group:req-${n}`, target: `agent:main:discord:group:target-${n}` };
}

describe("agent-to-agent flow under faults", () => {
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

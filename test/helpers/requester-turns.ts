import { runDurableObjectAlarm } from "cloudflare:test";
import { expect } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { ACCEPTED_NOTE_RUN } from "../../src/spawn/subagent-prompt";
import { advance, invoke, sendAndWait, sessionStub } from "./http";
import { quiesce } from "./quiesce";
import { childState, installFakes, type ModelAnswer, type ModelCall, requesterKey, subagentConfig } from "./subagents";

/** Drivers and fakes for "requester" announce delivery tests: completion turns, their children, their deliveries. */

export const REQUESTER_MODE = { subagents: { announceDelivery: "requester" } };
export const isTurn = (c: ModelCall) => c.lastUser.includes("[Internal task completion event]");
/** Child keys named in a completion turn's input, in order. */
export const childrenIn = (text: string) => [...text.matchAll(/^session_key: (\S+)$/gm)].map((m) => m[1]);
/** The fake requester relays what it was told: one line naming the children of the turn. */
export const relay = (c: ModelCall) => `relayed: ${childrenIn(c.lastUser).join(", ")}`;

export function answers(
  turn: (c: ModelCall) => ModelAnswer = relay,
  task: (c: ModelCall) => ModelAnswer = (c) => `result of ${/\[Subagent Task\]: (.*)$/m.exec(c.lastUser)?.[1]}`,
) {
  return (c: ModelCall): ModelAnswer =>
    c.step === "task" ? task(c) : c.step === "announce" ? "child notes" : isTurn(c) ? turn(c) : "hi";
}

export interface SessionSteps {
  pendingRuns: string[];
  dueTimers: string[];
  events: { id: string; state: string }[];
}

export async function stepsOf(key: string): Promise<SessionSteps> {
  const s = await childState(key);
  return {
    pendingRuns: s.pendingRuns,
    dueTimers: s.timers.filter((t) => t.due_at <= Date.now() && t.kind !== "lease").map((t) => `${t.kind}:${t.ref}`),
    events: s.flows.filter((f) => f.id.startsWith("announce:v1:")),
  };
}

/** Something of the pipeline is not finished yet: a run, a due timer, a child's announce or a received completion. */
export async function unfinished(keys: string[]): Promise<boolean> {
  for (const key of keys) {
    const s = await childState(key);
    if (s.pendingRuns.length > 0 || s.timers.some((t) => t.due_at <= Date.now() && t.kind !== "lease")) return true;
    if (
      s.flows.some(
        (f) =>
          (f.id.startsWith("announce:v1:") && f.state.startsWith("turn_") && f.state !== "turn_done") ||
          (/^announce:(?!v1:)/.test(f.id) && f.state !== "done"),
      )
    )
      return true;
  }
  return false;
}

async function anyDue(keys: string[]): Promise<boolean> {
  for (const key of keys) if ((await stepsOf(key)).dueTimers.length > 0) return true;
  return false;
}

/**
 * Drive the requester and its children one step at a time — finish the runs in flight, then run the
 * due timers of one object — until nothing is left to do. `between` runs after every step (an eviction).
 */
export async function drive(keys: () => string[], between?: () => Promise<void>): Promise<number> {
  let steps = 0;
  for (let round = 0; round < 80; round++) {
    let acted = false;
    for (const key of keys()) {
      const s = await stepsOf(key);
      for (const id of s.pendingRuns) await sessionStub(key).waitRun(id, 10_000);
      const still = (await stepsOf(key)).pendingRuns;
      // A run whose executor an eviction took is re-queued by its lease.
      if (still.length > 0) await advance(key, 60_000);
      else if (s.dueTimers.length > 0 || (await stepsOf(key)).dueTimers.length > 0)
        await runDurableObjectAlarm(sessionStub(key));
      else continue;
      for (const id of (await stepsOf(key)).pendingRuns) await sessionStub(key).waitRun(id, 10_000);
      acted = true;
      steps++;
      await between?.();
    }
    if (!acted) {
      // Nothing due, but work started after a run ended (a delivery POST, a slot release) may still be in flight.
      await quiesce();
      if (!(await anyDue(keys()))) return steps;
    }
  }
  throw new Error("did not settle");
}

export async function setup(config: Record<string, any> = REQUESTER_MODE, answer = answers()) {
  setConfigOverride(subagentConfig(config));
  const fakes = installFakes(answer);
  const req = requesterKey("req");
  await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
  return { req, fakes };
}

export async function spawnChildren(req: string, n: number): Promise<string[]> {
  const kids: string[] = [];
  for (let i = 1; i <= n; i++) {
    const r = await invoke("sessions_spawn", { task: `part ${i}`, label: `part ${i}` }, { sessionKey: req });
    expect(r.details).toMatchObject({ status: "accepted", note: ACCEPTED_NOTE_RUN });
    kids.push(r.details.childSessionKey);
  }
  return kids;
}

/** Distinct deliveries (by idempotency key) that reached the channel from `req`. */
export function delivered(fakes: { hooks: { body: any }[] }, req: string) {
  const byKey = new Map<string, any>();
  for (const h of fakes.hooks) if (h.body.sessionKey === req) byKey.set(h.body.idempotencyKey, h.body);
  return [...byKey.values()];
}

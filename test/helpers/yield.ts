import { runInDurableObject } from "cloudflare:test";
import { setConfigOverride } from "../../src/config/load";
import type { SessionObject } from "../../src/session/session-object";
import { SETTLED_LINE } from "../../src/spawn/yield-settlement";
import { sendAndWait, sessionStub } from "./http";
import { childState, installFakes, type ModelAnswer, type ModelCall, requesterKey, subagentConfig } from "./subagents";

/** Fakes and readers of sessions_yield's tests (test/spawn/yield-batch.test.ts, test/spawn/yield-eviction.test.ts). */

export const isResume = (c: ModelCall) => c.lastUser.includes(SETTLED_LINE);

/** The requester spawns `n` children (one step each), then yields; its resumed turn answers with what it read. */
export function yieldingAnswers(n: number, task: (c: ModelCall) => ModelAnswer = (c) => `result of ${taskOf(c)}`) {
  return (c: ModelCall): ModelAnswer => {
    if (c.step === "task") return task(c);
    if (c.step === "announce") return "child notes";
    if (isResume(c)) return `final answer from ${[...c.lastUser.matchAll(/result of (part \d)/g)].length} results`;
    if (c.lastUser === "go") {
      if (c.toolResults < n)
        return {
          toolCall: {
            name: "sessions_spawn",
            args: { task: `part ${c.toolResults + 1}`, label: `part ${c.toolResults + 1}` },
          },
        };
      return { toolCall: { name: "sessions_yield", args: { message: "waiting for the parts" } } };
    }
    return "hi";
  };
}
export const taskOf = (c: ModelCall) => /\[Subagent Task\]: (.*)$/m.exec(c.lastUser)?.[1];

export async function childrenOf(req: string): Promise<string[]> {
  return runInDurableObject(sessionStub(req), (_o: SessionObject, state) =>
    state.storage.sql
      .exec<{ json: string }>("SELECT json FROM flows WHERE kind = 'subagent_child' ORDER BY created_at, rowid")
      .toArray()
      .map((r) => (JSON.parse(r.json) as { childKey: string }).childKey),
  );
}

export async function batchesOf(req: string): Promise<{ id: string; state: string; data: any }[]> {
  return runInDurableObject(sessionStub(req), (_o: SessionObject, state) =>
    state.storage.sql
      .exec<{ id: string; state: string; json: string }>(
        "SELECT id, state, json FROM flows WHERE kind = 'subagent_yield' ORDER BY created_at",
      )
      .toArray()
      .map((r) => ({ id: r.id, state: r.state, data: JSON.parse(r.json) })),
  );
}

export async function resumeRuns(req: string) {
  return (await childState(req)).runs.filter((r) => r.kind === "subagent_completion");
}

/** User rows of the transcript with their text (hidden ones included). */
export async function userTexts(req: string): Promise<string[]> {
  return runInDurableObject(sessionStub(req), (_o: SessionObject, state) =>
    state.storage.sql
      .exec<{ json: string }>("SELECT json FROM messages WHERE role = 'user' ORDER BY seq")
      .toArray()
      .map((r) => {
        const m = JSON.parse(r.json);
        return typeof m.content === "string" ? m.content : m.content.map((b: any) => b.text ?? "").join("");
      }),
  );
}

export async function start(n: number, answer = yieldingAnswers(n)) {
  setConfigOverride(subagentConfig());
  const fakes = installFakes(answer);
  const req = requesterKey("yield");
  const run = await sendAndWait(req, "go", { channel: "webchat", to: "alice", deliver: true });
  return { req, fakes, run };
}

import { describe, expect, it } from "vitest";
import { echoModel } from "../../src/runners/builtin-models";

const CALL = {
  prompt: [{ role: "user" as const, content: [{ type: "text" as const, text: "hello" }] }],
};

/** Settles after every microtask queued so far (and those they queue), but before any timer. */
async function drainMicrotasks(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

describe("builtin/echo yields like a provider", () => {
  it("answers in one piece only after a macrotask, so a session's queue of runs never holds its object's event loop from one run to the next", async () => {
    // Without the yield, a session's runs ran back to back inside one event-loop turn and every call into that
    // object (a send, a read, an abort) waited for the whole queue (docs/scale.md, BENCH_ONLY=sends).
    let settled = false;
    const answer = echoModel()
      .doGenerate(CALL)
      .then((r) => {
        settled = true;
        return r;
      });
    await drainMicrotasks();
    expect(settled).toBe(false);
    const result = await answer;
    expect(result.content).toEqual([{ type: "text", text: "hello" }]);
  });

  it("an aborted call is refused before it answers", async () => {
    const abort = new AbortController();
    const answer = echoModel().doGenerate({ ...CALL, abortSignal: abort.signal });
    abort.abort(new Error("stopped"));
    await expect(answer).rejects.toThrow("stopped");
  });
});

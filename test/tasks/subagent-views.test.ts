import { describe, expect, it } from "vitest";
import { ERROR_PREVIEW_CHARS, modelStatus, taskRowView } from "../../src/tasks/subagent-views";
import type { TaskRecord } from "../../src/tasks/task-types";

/**
 * The TaskRow `subagents` shows a model (src/tasks/subagent-views.ts, docs/tasks.md): OpenClaw's status words and
 * its 120-character error preview. (Lists, waits and cancels end to end: test/tools/subagents*.test.ts.)
 */

const task = (over: Partial<TaskRecord>): TaskRecord => ({
  taskId: "t1",
  runtime: "subagent",
  requesterSessionKey: "agent:main:main",
  ownerKey: "agent:main:main",
  scopeKind: "session",
  task: "do it",
  status: "running",
  deliveryStatus: "pending",
  notifyPolicy: "done_only",
  createdAt: 1,
  ...over,
});

describe("TaskRow", () => {
  it(`cuts an error to ${ERROR_PREVIEW_CHARS} characters on its whitespace-collapsed text, … marking the cut`, () => {
    expect(ERROR_PREVIEW_CHARS).toBe(120);
    const long = `boom:\n\n${"x".repeat(200)}`;
    const row = taskRowView(task({ status: "failed", error: long }));
    expect(row.error).toHaveLength(ERROR_PREVIEW_CHARS);
    expect(row.error).toBe(`boom: ${"x".repeat(ERROR_PREVIEW_CHARS - 7)}…`);
    // At the bound: shown whole.
    const exact = "y".repeat(ERROR_PREVIEW_CHARS);
    expect(taskRowView(task({ status: "failed", error: exact })).error).toBe(exact);
    expect(taskRowView(task({})).error).toBeUndefined();
  });

  it("speaks the model's words: succeeded is completed (blocked when its result never arrived), lost is failed", () => {
    expect(modelStatus(task({ status: "succeeded" }))).toBe("completed");
    expect(modelStatus(task({ status: "succeeded", terminalOutcome: "blocked" }))).toBe("blocked");
    expect(modelStatus(task({ status: "lost" }))).toBe("failed");
    for (const s of ["queued", "running", "failed", "timed_out", "cancelled"] as const)
      expect(modelStatus(task({ status: s }))).toBe(s);
    expect(taskRowView(task({ status: "queued", lastEventAt: 5 })).execution).toEqual({
      state: "queued",
      lastActivityAt: 5,
    });
    expect(taskRowView(task({ status: "cancelled" })).execution).toEqual({ state: "finished" });
  });
});

import { describe, expect, it } from "vitest";
import { type Answer, Contract, type Doc, request, TASK_OPERATIONS } from "../helpers/contract";
import { enc, RESEARCH_TOKEN } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";

/**
 * The task ledger's routes of /openapi.json (docs/tasks.md), driven for real as test/http/openapi-contract.test.ts
 * drives the others: each answer is validated against its documented schema, and the last test fails on any
 * documented answer of these routes that no request produced (their 401, 429 and 500 are produced there).
 */

const KEY = `agent:main:contract-tasks-${crypto.randomUUID().slice(0, 8)}`;
let contract: Contract;
const check = (op: string, a: Answer | Promise<Answer>) => Promise.resolve(a).then((x) => contract.check(op, x));

describe("the task ledger's responses match /openapi.json", () => {
  it("a sub-agent's task: the ledger, its audit, the task by id, the operator's cancel", async () => {
    contract = new Contract((await request("GET", "/openapi.json", undefined, { token: null })).json as Doc);
    const spawned = await request("POST", "/tools/invoke", {
      tool: "sessions_spawn",
      args: { task: "say hi" },
      sessionKey: KEY,
    });
    const { childSessionKey, runId: childRun } = spawned.json.result.details;
    await request("GET", `/v1/runs/${childRun}/wait`);
    await quiesce();
    // Its task in the parent's ledger (docs/tasks.md), the ledger's audit, and the task by its id.
    const tasks = `/v1/sessions/${enc(KEY)}/tasks`;
    const listed = await check("GET /v1/sessions/{key}/tasks", request("GET", `${tasks}?limit=5`));
    const task = listed.json.tasks.find((t: any) => t.childSessionKey === childSessionKey);
    expect(task).toMatchObject({ runtime: "subagent", status: "succeeded", requesterSessionKey: KEY });
    const taskId = task.taskId;
    const byResearch = { token: RESEARCH_TOKEN };
    expect((await check("GET /v1/sessions/{key}/tasks", request("GET", tasks, undefined, byResearch))).status).toBe(
      403,
    );
    const badKey = "/v1/sessions/agent%3A%3Abad";
    expect((await check("GET /v1/sessions/{key}/tasks", request("GET", `${badKey}/tasks`))).status).toBe(400);
    const audit = await check("GET /v1/sessions/{key}/tasks/audit", request("GET", `${tasks}/audit`));
    expect(audit.json).toMatchObject({ sessionKey: KEY, findings: [], truncated: false });
    expect(
      (await check("GET /v1/sessions/{key}/tasks/audit", request("GET", `${tasks}/audit`, undefined, byResearch)))
        .status,
    ).toBe(403);
    expect((await check("GET /v1/sessions/{key}/tasks/audit", request("GET", `${badKey}/tasks/audit`))).status).toBe(
      400,
    );
    const one = await check("GET /v1/tasks/{taskId}", request("GET", `/v1/tasks/${encodeURIComponent(taskId)}`));
    expect(one.json).toEqual(task);
    expect(
      (
        await check(
          "GET /v1/tasks/{taskId}",
          request("GET", `/v1/tasks/${encodeURIComponent(taskId)}`, undefined, byResearch),
        )
      ).status,
    ).toBe(403);
    expect((await check("GET /v1/tasks/{taskId}", request("GET", "/v1/tasks/no-such-task"))).status).toBe(404);
    expect((await check("GET /v1/tasks/{taskId}", request("GET", `/v1/tasks/${"x".repeat(1025)}`))).status).toBe(400);
    // The operator's cancel of an ended task: answered, nothing cancelled.
    const cancel = (id: string, opts = {}) =>
      request("POST", `/v1/tasks/${encodeURIComponent(id)}/cancel`, undefined, opts);
    const ended = await check("POST /v1/tasks/{taskId}/cancel", cancel(taskId));
    expect(ended.json).toEqual({ taskId, found: true, cancelled: false, reason: "Task is already terminal." });
    expect((await check("POST /v1/tasks/{taskId}/cancel", cancel(taskId, byResearch))).status).toBe(403);
    expect((await check("POST /v1/tasks/{taskId}/cancel", cancel("no-such-task"))).status).toBe(404);
    expect((await check("POST /v1/tasks/{taskId}/cancel", cancel("x".repeat(1025)))).status).toBe(400);
  });

  it("every documented answer of the ledger's routes was produced and matched its schema", () => {
    const unseen = contract
      .documented()
      .filter((d) => TASK_OPERATIONS.some((op) => d.startsWith(`${op} `)) && !/ (401|429|500)$/.test(d))
      .filter((d) => !contract.seen.has(d));
    expect(unseen).toEqual([]);
  });
});

import { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../../errors";
import { taskAuditSchema } from "../../tasks/task-audit";
import { auditTasksOf, cancelTaskOf, getTasksOf, listTasks } from "../../tasks/task-client";
import { taskRecordSchema } from "../../tasks/task-types";
import { taskCancelSchema, taskListSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { handleOwner } from "../handle-owner";
import { routeDoc } from "../route-doc";
import { keyParam, rpc, targetOf } from "../route-helpers";
import { TASK_AUDIT_TEXT, TASK_CANCEL_TEXT, TASK_LIST_TEXT } from "../route-texts";
import { intQuery, valid } from "../validate";

/** `recentMinutes` of a REST listing: a week, the ledger's retention of ended tasks (docs/tasks.md). */
const LIST_RECENT_MINUTES_MAX = 10_080;

const taskParam = z.object({ taskId: z.string().max(1024).describe("Task id (`taskId` of the task)") });

/** The task ledger over REST (docs/tasks.md): a session's tasks and their audit, and one task by its id. */
export const tasksApp = new Hono<AppEnv>()
  .get(
    "/sessions/:key/tasks",
    routeDoc({
      tag: "sessions",
      summary: "The session's task ledger: its open tasks and those updated recently",
      description: TASK_LIST_TEXT,
      ok: { description: "The tasks, newest update first", schema: taskListSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid(
      "query",
      z.object({
        recentMinutes: intQuery({ min: 1, max: LIST_RECENT_MINUTES_MAX, def: 30, description: "Ended within" }),
        limit: intQuery({ min: 1, max: 100, def: 50, description: "Tasks" }),
      }),
    ),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const { recentMinutes, limit } = c.req.valid("query");
      const tasks = await rpc(listTasks(c.env, key, Date.now() - recentMinutes * 60_000, limit));
      return c.json({ sessionKey: key, tasks } satisfies z.infer<typeof taskListSchema>);
    },
  )
  .get(
    "/sessions/:key/tasks/audit",
    routeDoc({
      tag: "sessions",
      summary: "What looks wrong in the session's task ledger (stale, lost, undelivered tasks)",
      description: TASK_AUDIT_TEXT,
      ok: { description: "The findings", schema: taskAuditSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      return c.json((await rpc(auditTasksOf(c.env, key))) satisfies z.infer<typeof taskAuditSchema>);
    },
  )
  .get(
    "/tasks/:taskId",
    routeDoc({
      tag: "sessions",
      summary: "One task of a task ledger, by its id",
      ok: { description: "The task", schema: taskRecordSchema },
      errors: [400, 403, 404],
    }),
    valid("param", taskParam),
    async (c) => {
      const { taskId } = c.req.valid("param");
      const owner = handleOwner(c.get("cfg"), c.get("principal"), taskId, "Task");
      const [task] = await rpc(getTasksOf(c.env, owner, [taskId]));
      if (!task) throw notFound(`Task not found: ${taskId}`);
      return c.json(task satisfies z.infer<typeof taskRecordSchema>);
    },
  )
  // The operator's cancel (OpenClaw's `openclaw tasks cancel`): the same cascade as `subagents cancel`,
  // scoped by the owner session's key instead of the caller's session tree (src/tasks/task-cancel.ts).
  .post(
    "/tasks/:taskId/cancel",
    routeDoc({
      tag: "sessions",
      summary: "Cancel a task and every task below it",
      description: TASK_CANCEL_TEXT,
      ok: { description: "What the cancel did", schema: taskCancelSchema },
      errors: [400, 403, 404],
    }),
    valid("param", taskParam),
    async (c) => {
      const { taskId } = c.req.valid("param");
      const owner = handleOwner(c.get("cfg"), c.get("principal"), taskId, "Task");
      const answer = await rpc(cancelTaskOf(c.env, owner, taskId));
      if (!answer.found) throw notFound(`Task not found: ${taskId}`);
      return c.json({
        taskId,
        found: true,
        cancelled: answer.cancelled,
        ...(answer.reason ? { reason: answer.reason } : {}),
      } satisfies z.infer<typeof taskCancelSchema>);
    },
  );

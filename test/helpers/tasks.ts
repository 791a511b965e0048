import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { expect } from "vitest";
import type { SessionObject } from "../../src/session/session-object";
import { ownerKeyOfTask } from "../../src/tasks/task-id";
import { invoke, sessionStub } from "./http";
import { childState } from "./subagents";

/** Task-ledger test kit: spawn a child and learn its task id; read a session's ledger rows as stored. */

export interface Spawned {
  childSessionKey: string;
  runId: string;
  taskId: string;
}

/** sessions_spawn from `req`; the task id is read from the child's own record of it. */
export async function spawn(req: string, args: Record<string, unknown>): Promise<Spawned> {
  const r = await invoke("sessions_spawn", args, { sessionKey: req });
  expect(r.details?.status, JSON.stringify(r.body)).toBe("accepted");
  const child = await childState(r.details.childSessionKey);
  const taskId: string = child.meta.subagent.taskId;
  expect(ownerKeyOfTask(taskId)).toBe(req);
  return { childSessionKey: r.details.childSessionKey, runId: r.details.runId, taskId };
}

export interface StoredTask {
  taskId: string;
  status: string;
  error: string | null;
  deliveryStatus: string;
  cleanupAfter: number | null;
  endedAt: number | null;
}

export async function ledgerOf(key: string): Promise<StoredTask[]> {
  return runInDurableObject(sessionStub(key), (_obj: SessionObject, state) => {
    const sql = state.storage.sql;
    if (sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'tasks'").toArray().length === 0)
      return [];
    return sql
      .exec<any>(
        "SELECT task_id AS taskId, status, error, delivery_status AS deliveryStatus, cleanup_after AS cleanupAfter, ended_at AS endedAt FROM tasks ORDER BY created_at, task_id",
      )
      .toArray();
  });
}

/**
 * Let `ms` pass for a session's ledger: its task timestamps and its timers move back by `ms` (what the
 * wall clock would have done), then its alarm runs the timers now due.
 */
export async function age(key: string, ms: number): Promise<void> {
  const stub = sessionStub(key);
  await runInDurableObject(stub, (_obj: SessionObject, state) => {
    const sql = state.storage.sql;
    sql.exec(
      `UPDATE tasks SET created_at = created_at - ?1, updated_at = updated_at - ?1, started_at = started_at - ?1,
         ended_at = ended_at - ?1, last_event_at = last_event_at - ?1, cleanup_after = cleanup_after - ?1`,
      ms,
    );
    sql.exec("UPDATE timers SET due_at = due_at - ?", ms);
  });
  await runDurableObjectAlarm(stub);
}

/** The `run` events a session recorded for one run that say it ended (docs/events.md): each end once. */
export async function runEndEvents(sessionKey: string, runId: string): Promise<string[]> {
  return runInDurableObject(sessionStub(sessionKey), (_o: SessionObject, state) =>
    state.storage.sql
      .exec<{ data: string }>("SELECT data FROM events WHERE type = 'run' ORDER BY seq")
      .toArray()
      .map((r) => JSON.parse(r.data) as { runId: string; status: string })
      .filter((e) => e.runId === runId && e.status !== "queued" && e.status !== "running")
      .map((e) => e.status),
  );
}

/** The notes a session's task ledger wrote into its transcript, oldest first. */
export async function ledgerNotes(key: string): Promise<string[]> {
  return runInDurableObject(sessionStub(key), (_obj: SessionObject, state) =>
    state.storage.sql
      .exec<{ json: string }>("SELECT json FROM messages ORDER BY seq")
      .toArray()
      .map((r) => JSON.parse(r.json))
      .filter((m) => m.provenance?.sourceTool === "task_ledger")
      .map((m) => m.content[0].text),
  );
}

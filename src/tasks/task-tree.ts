import { listTasks } from "./task-client";
import { ownerKeyOfTask } from "./task-id";
import type { TaskRecord } from "./task-types";

/**
 * A caller's session tree as the ledgers hold it (docs/tasks.md, "Scope"): its own tasks, the tasks of the
 * child sessions of those, and so on. Read level by level from each session's own ledger, so a list costs one
 * call per session that has tasks in the view; bounded by TREE_MAX_DEPTH levels and `limit` tasks in all.
 */

/** `agents.defaults.subagents.maxSpawnDepth` is at most 5: no tree is deeper. */
export const TREE_MAX_DEPTH = 5;
/** Sessions read per level at most: a level wider than this is cut (the view says truncated). */
const LEVEL_MAX_SESSIONS = 50;

export interface TreeTask extends TaskRecord {
  /** 1 for the caller's own tasks, 2 for its children's, … */
  depth: number;
}

export async function listTree(
  env: Env,
  rootKey: string,
  sinceMs: number,
  limit: number,
): Promise<{ tasks: TreeTask[]; truncated: boolean }> {
  const out: TreeTask[] = [];
  const seen = new Set<string>([rootKey]);
  let level = [rootKey];
  let truncated = false;
  for (let depth = 1; depth <= TREE_MAX_DEPTH && level.length > 0 && out.length < limit; depth++) {
    if (level.length > LEVEL_MAX_SESSIONS) {
      level = level.slice(0, LEVEL_MAX_SESSIONS);
      truncated = true;
    }
    const lists = await Promise.all(level.map((key) => listTasks(env, key, sinceMs, limit - out.length)));
    const next: string[] = [];
    for (const tasks of lists)
      for (const t of tasks) {
        if (out.length >= limit) {
          truncated = true;
          break;
        }
        out.push({ ...t, depth });
        if (t.childSessionKey && !seen.has(t.childSessionKey)) {
          seen.add(t.childSessionKey);
          next.push(t.childSessionKey);
        }
      }
    level = next;
  }
  return { tasks: out, truncated };
}

/**
 * Whether a task id belongs to the caller's tree: its owner is the caller, or the caller spawned its owner's
 * ancestor line within TREE_MAX_DEPTH generations (each step reads one session's `spawnedBy`).
 */
export async function ownerInTree(env: Env, callerKey: string, taskId: string): Promise<string | null> {
  const owner = ownerKeyOfTask(taskId);
  if (!owner) return null;
  if (owner === callerKey) return owner;
  let key = owner;
  for (let i = 0; i < TREE_MAX_DEPTH; i++) {
    const meta = await env.SESSIONS.getByName(key).getMeta();
    const parent = meta?.spawnedBy;
    if (!parent) return null;
    if (parent === callerKey) return owner;
    key = parent;
  }
  return null;
}

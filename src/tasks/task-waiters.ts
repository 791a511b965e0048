import type { SessionHost } from "../session/host";

/**
 * Callers of `subagents wait` holding for tasks of this ledger to end. In memory on purpose, like the run
 * waiters (src/session/run-waiters.ts): the tasks are durable rows, the wait is not — a wait whose object
 * restarted is answered from the rows as they are and the tool attaches again for the time left
 * (src/tools/subagents-wait.ts). Each wait is bounded by its caller's timeout (at most 60 s).
 */
class TaskWaiters {
  private readonly byTask = new Map<string, Set<() => void>>();

  get size(): number {
    return this.byTask.size;
  }

  /** Resolves once any of `taskIds` changed, or after `ms`. */
  wait(taskIds: readonly string[], ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        for (const id of taskIds) {
          const set = this.byTask.get(id);
          set?.delete(done);
          if (set?.size === 0) this.byTask.delete(id);
        }
        resolve();
      };
      const timer = setTimeout(done, ms);
      for (const id of taskIds) {
        const set = this.byTask.get(id) ?? new Set();
        set.add(done);
        this.byTask.set(id, set);
      }
    });
  }

  release(taskId: string): void {
    const set = this.byTask.get(taskId);
    if (set) for (const w of [...set]) w();
  }
}

const WAITERS = new WeakMap<SessionHost, TaskWaiters>();

export function taskWaiters(host: SessionHost): TaskWaiters {
  let w = WAITERS.get(host);
  if (!w) {
    w = new TaskWaiters();
    WAITERS.set(host, w);
  }
  return w;
}

/**
 * Wake the waiters of a task whose status changed. Called inside the transaction that changed it; the wake
 * runs once that synchronous transaction has returned, so a woken waiter reads the committed row.
 */
export function wakeTaskWaiters(host: SessionHost, taskId: string): void {
  queueMicrotask(() => taskWaiters(host).release(taskId));
}

import type { RunSnapshot } from "./types";

/**
 * Callers of `waitRun` holding for a run to end (src/session/session-object.ts). In memory on purpose:
 * the run is durable, the wait is not — a caller that lost its connection waits again with the same
 * run id and gets the same outcome. Each wait is bounded by its caller's timeout.
 */
export class RunWaiters {
  private readonly byRun = new Map<string, Set<(s: RunSnapshot) => void>>();

  /** How many runs have someone waiting (test/http/rest.test.ts waits for a waiter to be registered). */
  get size(): number {
    return this.byRun.size;
  }

  /** Resolves with the snapshot `release` passes, or after `ms` with the run as `snapshotNow` reads it then. */
  wait(runId: string, ms: number, snapshotNow: () => RunSnapshot): Promise<RunSnapshot> {
    return new Promise<RunSnapshot>((resolve) => {
      const set = this.byRun.get(runId) ?? new Set();
      this.byRun.set(runId, set);
      const done = (s: RunSnapshot) => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.byRun.delete(runId);
        resolve(s);
      };
      const timer = setTimeout(() => done(snapshotNow()), ms);
      set.add(done);
    });
  }

  /** The run ended: wake everyone waiting on it. */
  release(runId: string, s: RunSnapshot): void {
    const set = this.byRun.get(runId);
    if (set) for (const w of [...set]) w(s);
  }

  /** The session goes away (delete, archive): wake every waiter with what `snapshotOf` says of its run. */
  releaseAll(snapshotOf: (runId: string) => RunSnapshot): void {
    for (const [runId, set] of this.byRun) {
      const s = snapshotOf(runId);
      for (const w of [...set]) w(s);
    }
    this.byRun.clear();
  }
}

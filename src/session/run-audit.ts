import { log } from "../log";
import type { FlowFinding, RunFinding, RunGuard, SessionAudit } from "./audit-types";
import { DEADLINE_TIMER, LEASE_TIMER, PUMP_TIMER, SWEEP_TIMER } from "./core-timers";
import type { SessionExtensions } from "./extensions";
import type { SessionHost } from "./host";
import { type RunRow, SWEEP_MS } from "./run-types";

/**
 * The run audit and the sweeper (docs/contract.md, "Runs"). Every open run must have something that moves
 * it on: a running run its executor in this instance, its lease timer or its deadline timer; the head of
 * the queue the run ahead of it, its holder (a sub-agent waiting for its lane slot) or the pump timer.
 * Timers can die (docs/timers.md) and executors can vanish, so a `sweep` timer re-checks a session with open
 * work every SWEEP_MS: a running run that nothing guards ends `lost` with the reason (its end releases its
 * slots through the usual run-ending hooks), a queue head that nothing starts is started. Extensions audit
 * their own open flows the same way (`SessionExtension.audit`): each flow state that waits on a timer gets
 * it back when it went missing.
 *
 * `auditSession` only looks (and repairs timers of flows); the sweep acts on what it found. Both take the
 * same inputs, so a caller that wants the picture without the sweep (a test, a task ledger) reuses it.
 */

/** Running runs inspected per audit: runs execute one at a time, so more than one is already a finding. */
const MAX_AUDITED_RUNS = 20;

export const UNGUARDED_RUN =
  "Nothing executes this run and nothing would end it (no executor, lease or deadline timer); the sweeper ended it";

/**
 * The audit, inside the caller's transaction. `executing`: the run this instance executes (memory only).
 * Flow repairs (a missing timer set due now) happen here, in the same transaction as the check.
 */
export function auditSession(host: SessionHost, extensions: SessionExtensions, executing: string | null): SessionAudit {
  const runs: RunFinding[] = [];
  if (!host.hasStorage || !host.meta) return { runs, flows: [] };
  const running = host.sql
    .exec<RunRow>("SELECT * FROM runs WHERE status = 'running' ORDER BY qseq LIMIT ?", MAX_AUDITED_RUNS)
    .toArray();
  for (const r of running) {
    const guard: RunGuard =
      executing === r.id
        ? "executor"
        : host.timers.get(LEASE_TIMER, r.id)
          ? "lease"
          : host.timers.get(DEADLINE_TIMER, r.id)
            ? "deadline"
            : "none";
    runs.push({
      runId: r.id,
      kind: r.kind,
      status: "running",
      guard,
      ...(guard === "none" ? { reason: UNGUARDED_RUN } : {}),
    });
  }
  const head = host.sql.exec<RunRow>("SELECT * FROM runs WHERE status = 'queued' ORDER BY qseq LIMIT 1").toArray()[0];
  if (head) {
    const guard: RunGuard =
      running.length > 0
        ? "run-ahead"
        : extensions.queuedRunIsHeld(host, head)
          ? "holder"
          : host.timers.get(PUMP_TIMER, "queue")
            ? "pump"
            : "none";
    runs.push({
      runId: head.id,
      kind: head.kind,
      status: "queued",
      guard,
      ...(guard === "none" ? { reason: "queued with nothing to start it" } : {}),
    });
  }
  return { runs, flows: extensions.audit(host) };
}

/** What the sweep needs of the run queue: the run it executes, and the two ways it moves runs on. */
export interface SweepQueue {
  readonly executing: string | null;
  finishRun(runId: string, outcome: { status: "lost"; error: string }): Promise<void>;
  kick(): void;
}

/**
 * The `sweep` timer: audit, end unguarded running runs `lost`, start a stalled queue, and come back in
 * SWEEP_MS while anything is still open. Returns the audit it acted on.
 */
export async function sweep(
  host: SessionHost,
  extensions: SessionExtensions,
  queue: SweepQueue,
): Promise<SessionAudit> {
  const audit = host.storage.transactionSync(() => auditSession(host, extensions, queue.executing));
  const unguarded = audit.runs.filter((r) => r.guard === "none");
  const repairedFlows = audit.flows.filter((f) => f.repaired);
  if (unguarded.length > 0 || repairedFlows.length > 0)
    log.warn("sweep_repaired", {
      sessionKey: host.key,
      lost: unguarded.filter((r) => r.status === "running").map((r) => r.runId),
      stalled: unguarded.filter((r) => r.status === "queued").map((r) => r.runId),
      flows: repairedFlows.map((f) => `${f.flow}:${f.state}`),
    });
  for (const r of unguarded) {
    if (r.status === "running") await queue.finishRun(r.runId, { status: "lost", error: r.reason ?? UNGUARDED_RUN });
    else if (host.hasStorage) host.timers.set(PUMP_TIMER, "queue", Date.now(), undefined, { keepEarlier: true });
  }
  if (!host.hasStorage) return audit;
  if (unguarded.some((r) => r.status === "queued")) queue.kick();
  // Open work left (runs or flows, repaired or not): come back; nothing open: the sweep ends until the next run.
  if (audit.runs.length > 0 || audit.flows.length > 0) host.timers.set(SWEEP_TIMER, SWEEP_REF, Date.now() + SWEEP_MS);
  else host.timers.clear(SWEEP_TIMER, SWEEP_REF);
  return audit;
}

const SWEEP_REF = "runs";

/** Arm the sweep for new open work (a queued or started run), unless it is already due sooner. In the caller's transaction. */
export function armSweep(host: SessionHost): void {
  host.timers.set(SWEEP_TIMER, SWEEP_REF, Date.now() + SWEEP_MS, undefined, { keepEarlier: true });
}

/**
 * An open flow's finding for the timer that moves it on (for extensions' `audit`). A timer that went missing
 * without dying (it was never written, or a version without it wrote the flow) is set again, due now; one
 * that died stays dead — its death is visible under GET /v1/sessions/{key}/timers/dead and is the operator's
 * to retry, so the sweeper never retries past an attempt limit.
 */
export function timerGuard(host: SessionHost, flow: string, state: string, kind: string, ref: string): FlowFinding {
  if (host.timers.get(kind, ref)) return { flow, state, guard: kind };
  const dead = host.sql.exec("SELECT 1 FROM dead_timers WHERE kind = ? AND ref = ?", kind, ref).toArray().length > 0;
  if (dead) return { flow, state, guard: `${kind} (dead)` };
  host.timers.set(kind, ref, Date.now());
  return { flow, state, guard: kind, repaired: true };
}

/**
 * What the run audit reports (src/session/run-audit.ts, docs/contract.md "Runs"): for each open run and each
 * open flow, what moves it on. Apart from the audit so that extensions (src/session/extensions.ts) can
 * report their flows without importing it.
 */

/** What keeps an open run moving, or "none". */
export type RunGuard = "executor" | "lease" | "deadline" | "run-ahead" | "holder" | "pump" | "none";

export interface RunFinding {
  runId: string;
  kind: string;
  status: "queued" | "running";
  guard: RunGuard;
  /** With guard "none": why nothing moves the run on. */
  reason?: string;
}

/** An open flow an extension audited: what moves it on, and whether the audit had to put its timer back. */
export interface FlowFinding {
  /** The flow row's id (or what the extension calls the open item). */
  flow: string;
  state: string;
  /** The timer kind (or run) that moves it on. */
  guard: string;
  repaired?: true;
}

export interface SessionAudit {
  runs: RunFinding[];
  flows: FlowFinding[];
}

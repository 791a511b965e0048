import type { Config } from "../config/schema";

/** Who is calling a tool: the requester session, resolved by auth (docs/contract.md, "Authentication and scopes"). */
export interface Caller {
  agentId: string;
  /** Canonical key of the requester session. */
  sessionKey: string;
  /** operator = GATEWAY_TOKEN; agent = an AGENT_TOKENS token; run = a webhook run token; internal = a built-in run. */
  role: "operator" | "agent" | "run" | "internal";
  sandboxed: boolean;
  isSubagent: boolean;
  /** A sub-agent's spawn depth (from its metadata); read only when it matters (maxSpawnDepth > 1). */
  spawnDepth?: number;
  /** Run that minted a run token (role "run"). */
  runId?: string;
}

export interface ToolContext {
  env: Env;
  cfg: Config;
  caller: Caller;
  /**
   * Times one phase of the call into the response's `Server-Timing` header (docs/scale.md, "Where a
   * send's time goes"); absent outside HTTP (built-in runs calling tools), where it is a no-op.
   */
  time?: <T>(phase: string, work: Promise<T>) => Promise<T>;
  /**
   * Set for a tool call a model makes inside a built-in run (src/tools/run-tools.ts): the run, and how many
   * other tool calls of the same model response came before this one (sessions_yield's "deferred").
   */
  turn?: { runId: string; earlierCallsInStep: number };
}

/** `ctx.time(phase, work)` when the context records timings, else just `work`. */
export function timed<T>(ctx: ToolContext, phase: string, work: Promise<T>): Promise<T> {
  return ctx.time ? ctx.time(phase, work) : work;
}

/** Tool refusals the spec defines as results (200), never as HTTP errors. */
export interface Refusal {
  status: "error" | "forbidden";
  error: string;
  [extra: string]: unknown;
}

export function refusal(status: Refusal["status"], error: string, extra: Record<string, unknown> = {}): Refusal {
  return { status, error, ...extra };
}

export function isRefusal(v: unknown): v is Refusal {
  return (
    typeof v === "object" &&
    v !== null &&
    "status" in v &&
    "error" in v &&
    ((v as Refusal).status === "error" || (v as Refusal).status === "forbidden")
  );
}

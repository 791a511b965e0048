import type { RunInput, RunSnapshot, RunStatus, TranscriptMessage, Usage } from "./types";

/** A run whose executor is not seen alive for this long is considered lost to an eviction (docs/architecture.md, "Inside a session object"). */
export const LEASE_MS = 60_000;
/**
 * A run held by an outside runtime (a webhook runtime answered 202) and without a deadline is lost when the
 * runtime neither completes nor renews it (`POST /v1/runs/{id}/heartbeat`) for this long (docs/contract.md, "Runs").
 */
export const RUNTIME_LEASE_MS = 10 * 60_000;
/** A session with open runs or flows is audited this often (src/session/run-audit.ts). */
export const SWEEP_MS = 10 * 60_000;
/** Longest server-side wait one call may hold. Clients re-call `wait` to wait longer. */
export const MAX_WAIT_MS = 15 * 60_000;

/** A row of the `runs` table (src/session/schema.ts). */
export type RunRow = {
  id: string;
  qseq: number;
  kind: string;
  status: RunStatus;
  input_json: string;
  reply: string | null;
  error: string | null;
  usage_json: string | null;
  model: string | null;
  attempts: number;
  user_seq: number | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
};

/** What a runner (src/session/extensions.ts, `produceReply`) returns for a run that produced a reply. */
export interface RunnerResult {
  /** Assistant and toolResult messages the session still has to record, in order (runners that report at the end). */
  messages: TranscriptMessage[];
  /** Final assistant text (the run's reply). */
  reply: string;
  usage: Usage;
  model: string;
  provider: string;
}

/**
 * A runner's answer for a run that goes on outside this object (a webhook runtime answered 202): the run
 * stays `running`, no executor waits for it in memory, and it is ended later by `finishRun` — its
 * completion, its deadline or its lease (docs/contract.md, "Runs"). Nothing in memory to lose, so an
 * eviction changes nothing for it.
 */
export const HELD_ELSEWHERE: unique symbol = Symbol("held elsewhere");
export type RunnerAnswer = RunnerResult | typeof HELD_ELSEWHERE;

export interface RunOutcome {
  status: Exclude<RunStatus, "queued" | "running">;
  reply?: string;
  error?: string;
  result?: RunnerResult;
}

/** Everything a follow-up step (flows, outbox) may touch while a run ends, inside its transaction. */
export interface RunEndedEvent {
  run: RunSnapshot;
  input: RunInput;
}

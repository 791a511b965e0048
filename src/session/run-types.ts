import type { RunInput, RunSnapshot, RunStatus, TranscriptMessage, Usage } from "./types";

/** A run whose executor is not seen alive for this long is considered lost to an eviction (docs/architecture.md, "Inside a session object"). */
export const LEASE_MS = 60_000;
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

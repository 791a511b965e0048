import type { Config } from "../config/schema";
import type { SessionEvents } from "../events/session-events";
import type { IndexEntry } from "../registry/row";
import type { IndexDirty } from "./index-sync";
import type { RunOutcome, RunRow } from "./run-types";
import type { TimerKinds } from "./timer-policy";
import type { Timers } from "./timers";
import type { Transcript } from "./transcript";
import type { DeadDelivery, EnqueueRequest, RunSnapshot, SessionMeta, TranscriptMessage } from "./types";

/**
 * What a session object offers the modules that act for it: its extensions (flows, outbox, sub-agent
 * lifecycle, runners; src/session/extensions.ts) and the helpers it calls directly (spawning, attachments).
 * They take this instead of the SessionObject class, so the object can import them and they never import
 * the object: no import cycle (scripts/check-cycles.mjs). SessionObject implements it.
 */
export interface SessionHost {
  readonly key: string;
  readonly cfg: Config;
  readonly bindings: Env;
  readonly meta: SessionMeta | null;
  readonly sql: SqlStorage;
  readonly storage: DurableObjectStorage;
  readonly timers: Timers;
  /** The kinds its timers may have: the object's own and its extensions' (src/session/extensions.ts). */
  readonly timerKinds: TimerKinds;
  readonly transcript: Transcript;
  /** The session's event log and live watchers (docs/events.md). */
  readonly events: SessionEvents;
  /** This session has ever been written (its tables exist): reads of one that was not must not create storage. */
  readonly hasStorage: boolean;
  /** Someone watches this session's event stream or one of its runs' streams now (docs/events.md). */
  isWatched(): boolean;
  /** Write `meta` back (inside the caller's transaction). */
  saveMeta(): void;
  /** Queue a run; `alsoInTransaction` writes its own rows in the same transaction as the run. */
  enqueue(
    req: EnqueueRequest,
    alsoInTransaction?: (host: SessionHost, queued: RunSnapshot) => void,
  ): Promise<RunSnapshot>;
  ensureSession(init?: EnqueueRequest["init"]): Promise<SessionMeta>;
  getRun(runId: string): Promise<RunSnapshot | null>;
  runRow(runId: string): RunRow | undefined;
  snapshot(r: RunRow): RunSnapshot;
  /** End a run exactly once (src/session/run-queue.ts). */
  finishRun(runId: string, outcome: RunOutcome): Promise<void>;
  /** A finished model step of a running run enters the transcript now (src/session/run-queue.ts). */
  recordStep(runId: string, messages: TranscriptMessage[]): void;
  deleteSession(opts?: { allowMain?: boolean; archivedAs?: IndexEntry }): Promise<{ deleted: boolean }>;
  /** Start the run queue if this instance is not already working through it. */
  kick(): void;
  markIndexDirty(opts?: IndexDirty): Promise<void>;
  /** Tell the extensions a delivery ended dead (their `onDeliveryDead`; src/channels/outbox-attempts.ts). */
  deliveryDead(delivery: DeadDelivery): Promise<void>;
}

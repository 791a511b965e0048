import { displayKey, shownProvenance } from "../keys";
import { log } from "../log";
import { capReplyAndError } from "./byte-budget";
import { DEADLINE_TIMER, LEASE_TIMER, PUMP_TIMER } from "./core-timers";
import type { SessionExtensions } from "./extensions";
import type { SessionHost } from "./host";
import type { IndexSync } from "./index-sync";
import { addRunUsage, endedRunUsage, runDeadlineSeconds } from "./run-accounting";
import { armSweep } from "./run-audit";
import {
  HELD_ELSEWHERE,
  LEASE_MS,
  MAX_WAIT_MS,
  RUNTIME_LEASE_MS,
  type RunEndedEvent,
  type RunOutcome,
  type RunRow,
} from "./run-types";
import { RunWaiters } from "./run-waiters";
import type { TimerRow } from "./timers";
import { runEndedWithoutReply, userMessageOf } from "./transcript";
import { FINAL_STATUSES, type RunInput, type RunSnapshot, type RunStatus, type TranscriptMessage } from "./types";

/**
 * A failed run's error: the error's message, and its cause's when the message alone says nothing of it (the AI
 * SDK reports a provider body that failed as "Failed to process successful response"; src/runners/provider-fetch.ts).
 */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? err.cause.message : "";
  return cause && !err.message.includes(cause) ? `${err.message}: ${cause}` : err.message;
}

/** The error of a run whose executor was lost twice (docs/contract.md, "Runs"). */
export const LOST_TWICE = "Run was interrupted by a restart and could not be resumed";
/** The error of a run whose outside runtime stopped renewing its lease. */
export const RUNTIME_SILENT = `The runtime that accepted this run sent neither a completion nor a heartbeat for ${RUNTIME_LEASE_MS / 1000}s (POST /v1/runs/{id}/heartbeat renews it); presumed lost`;

/**
 * A session's run queue: FIFO, one run at a time. Claims the oldest queued run, has a runner produce
 * its reply (src/session/extensions.ts), and ends every run exactly once — with its lease and deadline
 * timers so a run lost to an eviction or a hung runner still reaches a final status.
 */
export class RunQueue {
  /** The run this instance is executing. Memory only on purpose: losing it is how a lost run is detected. */
  private active: { runId: string; abort: AbortController } | null = null;
  private pumping = false;
  private kickedWhilePumping = false;
  private readonly waiters = new RunWaiters();

  constructor(
    private readonly host: SessionHost,
    private readonly indexSync: IndexSync,
    /** Who produces each run's reply and what follows its end (src/extensions.ts). */
    private readonly extensions: SessionExtensions,
  ) {}

  /** The run this instance is executing now, if any (the sweeper's audit, src/session/run-audit.ts). */
  get executing(): string | null {
    return this.active?.runId ?? null;
  }

  /** Start the queue if this instance is not already working through it. */
  kick(): void {
    // A kick while the pump is winding down (it found nothing, but its promise has not settled yet)
    // must not be lost: a lease that just re-queued a run would otherwise wait for the next alarm.
    if (this.pumping) {
      this.kickedWhilePumping = true;
      return;
    }
    this.pumping = true;
    this.kickedWhilePumping = false;
    void this.pump()
      .catch((err) => log.error("session_queue_failed", { sessionKey: this.host.key, error: err }))
      .finally(() => {
        this.pumping = false;
        if (this.kickedWhilePumping) this.kick();
      });
  }

  private async pump(): Promise<void> {
    for (;;) {
      const run = this.claimNext();
      if (!run) {
        // Stopping: a held run's holder may have set a timer during the claim (a deleted session has none).
        if (this.host.hasStorage) await this.host.timers.arm();
        return;
      }
      await this.host.timers.arm();
      await this.execute(run);
    }
  }

  /**
   * Claim the oldest queued run, unless one is already running (FIFO, one at a time: a run whose
   * executor was lost keeps the queue blocked until its lease timer re-queues or ends it).
   */
  private claimNext(): RunRow | null {
    const { host } = this;
    if (!host.hasStorage || !host.meta) return null;
    return host.storage.transactionSync(() => {
      const running = host.sql.exec("SELECT id FROM runs WHERE status = 'running' LIMIT 1").toArray();
      if (running.length > 0) return null;
      const next = host.sql
        .exec<RunRow>("SELECT * FROM runs WHERE status = 'queued' ORDER BY qseq LIMIT 1")
        .toArray()[0];
      // Nothing queued, or the head is held (its holder kicks the queue and owns the timer that will).
      if (!next || this.extensions.queuedRunIsHeld(host, next)) {
        host.timers.clear(PUMP_TIMER, "queue");
        return null;
      }
      const now = Date.now();
      const input = JSON.parse(next.input_json) as RunInput;
      host.sql.exec(
        "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?), attempts = attempts + 1 WHERE id = ?",
        now,
        next.id,
      );
      host.timers.set(LEASE_TIMER, next.id, now + LEASE_MS);
      // The sweeper audits while the run is open: a guard timer that dies must not leave it running forever.
      armSweep(host);
      // The start the pump timer stood for happened: it goes back to a late safety net for the runs queued
      // behind this one, so an enqueue's "start now" fires no alarm once the run is claimed (src/session/enqueue.ts).
      host.timers.set(PUMP_TIMER, "queue", now + LEASE_MS);
      const timeoutSeconds = runDeadlineSeconds(input, host.cfg);
      // The deadline is set once, at the first start, so a retried run keeps its original deadline.
      if (next.started_at === null && timeoutSeconds !== null)
        host.timers.set(DEADLINE_TIMER, next.id, now + timeoutSeconds * 1000, { timeoutSeconds });
      const claimed = host.runRow(next.id)!;
      const started = host.snapshot(claimed);
      this.extensions.onRunStarted(host, claimed, input, started);
      host.events.run(started);
      return claimed;
    });
  }

  private async execute(run: RunRow): Promise<void> {
    const abort = new AbortController();
    this.active = { runId: run.id, abort };
    const input = JSON.parse(run.input_json) as RunInput;
    try {
      this.writeUserMessage(run, input);
      const result = await this.extensions.produceReply(this.host, run, input, abort.signal);
      // Going on outside (a webhook runtime answered 202): its completion, deadline or lease ends it.
      if (result === HELD_ELSEWHERE) return;
      await this.finishRun(run.id, { status: "ok", reply: result.reply, result });
    } catch (err) {
      // A deadline or an abort has already ended the run; finishRun ignores ended runs.
      await this.finishRun(run.id, { status: "error", error: errorText(err) || "agent error" });
    } finally {
      if (this.active?.runId === run.id) this.active = null;
    }
  }

  /** The run's inbound message enters the transcript when the run starts (processing order), once. */
  private writeUserMessage(run: RunRow, input: RunInput): void {
    if (run.user_seq !== null || input.kind === "command") return;
    const { host } = this;
    host.storage.transactionSync(() => {
      const seq = host.transcript.append(userMessageOf(input, shownProvenance), run.id, input.kind);
      host.sql.exec("UPDATE runs SET user_seq = ? WHERE id = ?", seq, run.id);
    });
  }

  /**
   * A finished model step of a running run enters the transcript now, not at the run's end: a run cut
   * short by its deadline or an eviction keeps its tool calls and results (partial-progress announces,
   * a retried run sees what its lost attempt did), and history shows a long run's progress.
   */
  recordStep(runId: string, messages: TranscriptMessage[]): void {
    const { host } = this;
    if (!host.hasStorage) return;
    host.storage.transactionSync(() => {
      // A step that finishes after the deadline ended the run is not recorded: the run's outcome is final.
      if (host.runRow(runId)?.status !== "running") return;
      for (const msg of messages) host.transcript.append(msg, runId);
    });
    host.events.runs.stepEnded(runId);
  }

  /**
   * End a run exactly once: record the outcome and the messages it produced, update usage, clear its
   * timers and write its follow-ups — all in one transaction, so a crash between a run's end and its
   * follow-up step loses nothing. A run that already ended (deadline, abort) is left as it is.
   */
  async finishRun(runId: string, outcome: RunOutcome): Promise<void> {
    const { host } = this;
    // The session was deleted while this run was in flight: there is nothing left to record.
    if (!host.hasStorage) return;
    outcome = capReplyAndError(outcome, host.cfg.limits.maxMessageBytes);
    const ended = host.storage.transactionSync((): RunEndedEvent | null => {
      const row = host.runRow(runId);
      if (!row || FINAL_STATUSES.has(row.status)) return null;
      const now = Date.now();
      const input = JSON.parse(row.input_json) as RunInput;
      const m = host.meta!;
      const res = outcome.result;
      const ok = Boolean(res) && outcome.status === "ok";
      if (res && ok) {
        for (const msg of res.messages) host.transcript.append(msg, runId);
        m.systemSent = true;
      } else if (row.status === "running") {
        // The transcript records failed and cut-short runs too, as OpenClaw does (stopReason error/aborted).
        host.transcript.append(runEndedWithoutReply(m.model, outcome, now), runId);
      }
      const spent = endedRunUsage(host.sql, runId, res, ok);
      if (spent) addRunUsage(m, host.cfg, spent.usage, ok ? res : undefined);
      m.abortedLastRun = outcome.status === "aborted" || outcome.status === "timeout" || outcome.status === "lost";
      m.updatedAt = now;
      host.saveMeta();
      host.sql.exec(
        "UPDATE runs SET status = ?, reply = ?, error = ?, usage_json = ?, model = ?, ended_at = ? WHERE id = ?",
        outcome.status,
        outcome.reply ?? null,
        outcome.error ?? null,
        spent ? JSON.stringify(spent.usage) : null,
        spent?.model ?? null,
        now,
        runId,
      );
      host.timers.clear(LEASE_TIMER, runId);
      host.timers.clear(DEADLINE_TIMER, runId);
      this.indexSync.schedule(now);
      const event: RunEndedEvent = { run: host.snapshot(host.runRow(runId)!), input };
      host.events.run(event.run, input);
      this.extensions.onRunEnded(host, event);
      return event;
    });
    if (!ended) return;
    await host.timers.arm();
    // A session going idle on a quiet shard writes its row before waiters wake, so a client that waited
    // on the run lists it with the run's usage and model; on a busy shard it waits for its paced write
    // (src/session/index-sync.ts); a busy session (queue not empty) stays coalesced.
    const idle = host.sql.exec("SELECT 1 FROM runs WHERE status = 'queued' LIMIT 1").toArray().length === 0;
    await host.markIndexDirty({ idle });
    this.waiters.release(runId, ended.run);
    this.extensions.afterRunEnded(host, ended);
    this.kick();
  }

  /**
   * Server-side wait: resolves when the run ends or after `timeoutMs` with the run as it is then.
   * The waiter lives in memory, but the run does not: a caller that lost its connection calls
   * again with the same run id and gets the same outcome.
   */
  async wait(runId: string, timeoutMs: number): Promise<RunSnapshot | null> {
    const now = await this.host.getRun(runId);
    if (!now || FINAL_STATUSES.has(now.status) || timeoutMs <= 0) return now;
    const ms = Math.min(timeoutMs, MAX_WAIT_MS);
    return this.waiters.wait(runId, ms, () => this.host.snapshot(this.host.runRow(runId)!));
  }

  /** Abort a queued or running run (its executor, if this instance has it, stops too). */
  async abort(runId: string): Promise<void> {
    const row = this.host.runRow(runId);
    if (row?.status !== "queued" && row?.status !== "running") return;
    if (this.active?.runId === runId) this.active.abort.abort(new Error("aborted"));
    await this.finishRun(runId, { status: "aborted", error: "Run aborted" });
  }

  /** The session is being deleted: wake every waiter with `status` and `error`. */
  releaseAllWaiters(status: RunStatus, error: string): void {
    this.waiters.releaseAll((runId) => {
      const row = this.host.runRow(runId);
      return row
        ? { ...this.host.snapshot(row), status, error }
        : ({
            runId,
            sessionKey: displayKey(this.host.key),
            status,
            error,
            kind: "inbound",
            createdAt: 0,
          } as RunSnapshot);
    });
  }

  /** Abort the executor of the run in flight, if this instance has one. */
  abortActive(reason: string): void {
    this.active?.abort.abort(new Error(reason));
  }

  /** The run's deadline timer fired: end it as timed out, with the deadline it was given. */
  async onDeadline(t: TimerRow): Promise<void> {
    const row = this.host.runRow(t.ref);
    this.host.timers.clear(DEADLINE_TIMER, t.ref);
    if (!row || FINAL_STATUSES.has(row.status)) return;
    if (this.active?.runId === t.ref) this.active.abort.abort(new Error("deadline"));
    // Report the deadline the run was given (the timer's payload), not the wall time the alarm fired at.
    const given = t.payload ? (JSON.parse(t.payload) as { timeoutSeconds?: number }).timeoutSeconds : undefined;
    const secs = given ?? Math.round(((Date.now() - (row.started_at ?? row.created_at)) / 1000) * 10) / 10;
    await this.finishRun(t.ref, { status: "timeout", error: `Run timed out after ${secs}s` });
  }

  /**
   * A lease expired (docs/contract.md, "Runs"). A run held by an outside runtime (a webhook that answered
   * 202): its deadline ends it when it has one; without one, this lease was the runtime's to renew, and it
   * did not — the run is lost. Otherwise, if this instance still executes the run, renew the lease; if not,
   * its executor was lost (eviction, restart): retry once, then end it `lost` — never "running" forever.
   */
  async onLeaseExpired(runId: string): Promise<void> {
    const { host } = this;
    const row = host.runRow(runId);
    if (row?.status !== "running") {
      host.timers.clear(LEASE_TIMER, runId);
      return;
    }
    if (this.extensions.runIsHeldElsewhere(host, runId)) {
      if (host.timers.get(DEADLINE_TIMER, runId)) {
        host.timers.clear(LEASE_TIMER, runId);
        return;
      }
      await this.finishRun(runId, { status: "lost", error: RUNTIME_SILENT });
      return;
    }
    if (this.active?.runId === runId) {
      host.timers.set(LEASE_TIMER, runId, Date.now() + LEASE_MS);
      return;
    }
    if (row.attempts < 2) {
      host.storage.transactionSync(() => {
        host.sql.exec("UPDATE runs SET status = 'queued' WHERE id = ?", runId);
        host.events.run(host.snapshot(host.runRow(runId)!));
        host.timers.clear(LEASE_TIMER, runId);
      });
      this.kick();
      return;
    }
    await this.finishRun(runId, { status: "lost", error: LOST_TWICE });
  }
}

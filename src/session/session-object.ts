import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { SwitchboardError, toRpcError } from "../errors";
import { SessionEvents } from "../events/session-events";
import { displayKey, parseCanonical, shownProvenance } from "../keys";
import { log } from "../log";
import { parseSendCommand } from "../policy/send-policy";
import { type IndexEntry, indexEntryOf, type SessionRow } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import { runBuiltinModel } from "../runners/builtin-run";
import type { RunnerResult } from "../runners/model-runner";
import { type SpawnChildRequest, spawnChildInObject } from "../spawn/child-spawn";
import { capReplyAndError, TRANSCRIPT_CHUNK_BYTES } from "./byte-budget";
import { assertOpen, beginClosing } from "./closing";
import { recordInboundRoute } from "./inbound-route";
import { IndexSync } from "./index-sync";
import { type FinishedFlowStates, nextPruneDue, PRUNE_REF, PRUNE_TIMER, pruneFinished } from "./retention";
import { addRunUsage, endedRunUsage, runDeadlineSeconds } from "./run-accounting";
import { newRunId } from "./run-id";
import { RunWaiters } from "./run-waiters";
import { migrate } from "./schema";
import { runDueTimers } from "./timer-policy";
import { type TimerRow, Timers } from "./timers";
import { type BudgetedPage, runEndedWithoutReply, Transcript, userMessageOf } from "./transcript";
import {
  type EnqueueRequest,
  FINAL_STATUSES,
  type RunInput,
  type RunSnapshot,
  type RunStatus,
  type SessionMeta,
  type TranscriptMessage,
} from "./types";

/** A run whose executor is not seen alive for this long is considered lost to an eviction (docs/architecture.md, "Inside a session object"). */
export const LEASE_MS = 60_000;
/** Longest server-side wait one call may hold. Clients re-call `wait` to wait longer. */
export const MAX_WAIT_MS = 15 * 60_000;

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

/**
 * Later layers (agent-to-agent flows, the outbox, sub-agent lifecycle, webhook runtimes) plug into the
 * session object here instead of growing one class: each hook runs at a fixed point of the run/timer
 * lifecycle with the object as its host.
 */
export interface SessionExtension {
  name: string;
  /** Inside the run-ending transaction: write follow-up rows (timers, outbox, flow state). Must be synchronous. */
  onRunEnded?(host: SessionObject, event: RunEndedEvent): void;
  /** After that transaction committed: start work that may do I/O (a delivery attempt, an RPC). */
  afterRunEnded?(host: SessionObject, event: RunEndedEvent): void | Promise<void>;
  /** A due timer of a kind this extension owns; return true when handled. */
  onTimer?(host: SessionObject, timer: TimerRow): Promise<boolean> | boolean;
  /** Produce the reply of a run instead of the built-in model runner (webhook agents); undefined = not mine. */
  produceReply?(
    host: SessionObject,
    run: RunRow,
    input: RunInput,
    signal: AbortSignal,
  ): Promise<RunnerResult> | undefined;
  /**
   * An inbound message this object may not run itself (a thread bound to a sub-agent): a promise of the
   * run it became elsewhere (null: run it here), or null synchronously when the hook has nothing to check.
   */
  forwardInbound?(host: SessionObject, req: EnqueueRequest): Promise<RunSnapshot | null> | null;
  /** A queued run that may not start yet (a sub-agent task waiting for its lane slot); its holder kicks the queue later. */
  holdsQueuedRun?(host: SessionObject, run: RunRow): boolean;
  /** Called before the session's storage is deleted (archive/delete): release what lives elsewhere. */
  beforeDelete?(host: SessionObject): Promise<void> | void;
  /**
   * True when the run is executed outside this object (a webhook runtime accepted it and completes it
   * through the API later): no in-memory executor is expected, so an expired lease is not a lost run.
   * The run's deadline timer still ends it if nobody answers.
   */
  holdsRun?(host: SessionObject, runId: string): boolean;
  /** The flow kinds this extension writes and their finished states: pruned after the retention period (retention.ts). */
  finishedFlows?: FinishedFlowStates;
  /** Methods other objects and routes call through `callExtension` (flow callbacks, delivery listing). */
  // biome-ignore lint/suspicious/noExplicitAny: each extension narrows its own argument type; ExtensionRpc re-types every call
  rpc?: Record<string, (host: SessionObject, arg: any) => unknown>;
}

/**
 * The RPC tables of the extensions, by extension name. Each extension module adds its entry by
 * declaration merging (`declare module "…/session/session-object" { interface ExtensionRpc { … } }`),
 * so every `callExtension` is checked against the method's real argument and result types while this
 * module still imports none of them.
 */
// biome-ignore lint/suspicious/noEmptyInterface: an empty table that extension modules fill by declaration merging
export interface ExtensionRpc {}

type RpcMethod<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N]> = ExtensionRpc[N][M] extends (
  ...args: never[]
) => unknown
  ? ExtensionRpc[N][M]
  : never;
/** The call's argument list: the method's second parameter, or nothing for a method that takes only its host. */
type RpcArgs<F extends (...args: never[]) => unknown> = Parameters<F> extends [unknown, infer A] ? [arg: A] : [];

/** Call an extension's method in the object behind `stub`, typed by that extension's RPC table. */
export async function callExtension<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N] & string>(
  stub: DurableObjectStub<SessionObject>,
  name: N,
  method: M,
  ...arg: RpcArgs<RpcMethod<N, M>>
): Promise<Awaited<ReturnType<RpcMethod<N, M>>>> {
  // The one place the untyped wire call is narrowed: the table above is what the object dispatches to.
  return (await stub.extensionCall(name, method, arg[0])) as Awaited<ReturnType<RpcMethod<N, M>>>;
}

const EXTENSIONS: SessionExtension[] = [];
export function registerSessionExtension(ext: SessionExtension): void {
  const at = EXTENSIONS.findIndex((e) => e.name === ext.name);
  if (at >= 0) EXTENSIONS[at] = ext;
  else EXTENSIONS.push(ext);
}

/**
 * One Durable Object per canonical session key (docs/architecture.md). It owns the session's metadata, transcript,
 * run queue, timers and outbox in SQLite, runs one run at a time in FIFO order, and keeps its registry
 * row current. Every method is typed RPC; there is no fetch handler.
 */
export class SessionObject extends DurableObject<Env> {
  // Public so extensions (flows, outbox, lifecycle) can act as this object's host.
  readonly sql: SqlStorage;
  readonly timers: Timers;
  readonly transcript: Transcript;
  readonly events: SessionEvents;
  meta: SessionMeta | null = null;
  private schemaReady = false;
  /** The run this instance is executing. Memory only on purpose: losing it is how a lost run is detected. */
  private active: { runId: string; abort: AbortController } | null = null;
  private pumping = false;
  private kickedWhilePumping = false;
  private readonly waiters = new RunWaiters();
  private readonly indexSync = new IndexSync(this);

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.timers = new Timers(this.sql, ctx.storage);
    this.events = new SessionEvents(this.sql, ctx, {
      hasSession: () => this.schemaReady && this.meta !== null,
      runSnapshot: (runId) => (this.schemaReady ? this.snapshotOf(runId) : null),
    });
    this.transcript = new Transcript(
      this.sql,
      () => this.cfg.limits.maxMessageBytes,
      (seq, runId, head) => this.events.message(seq, runId, head),
    );
    // Reads of a session that was never written must not create storage, so the schema is only
    // created by the first write; an existing schema is migrated before any call is served.
    ctx.blockConcurrencyWhile(async () => {
      const exists =
        this.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").toArray()
          .length > 0;
      if (exists) this.ensureSchema();
    });
  }

  // ---------------------------------------------------------------- identity & metadata

  get key(): string {
    return this.meta?.key ?? this.ctx.id.name ?? "";
  }

  get cfg(): Config {
    return loadConfig(this.env);
  }

  /** The Worker env, for extensions (DurableObject keeps `env` protected). */
  get bindings(): Env {
    return this.env;
  }

  get storage(): DurableObjectStorage {
    return this.ctx.storage;
  }

  /** This session has ever been written (its tables exist): reads of one that was not must not create storage. */
  get hasStorage(): boolean {
    return this.schemaReady;
  }

  private ensureSchema(): void {
    if (this.schemaReady) return;
    migrate(this.sql);
    const row = this.sql.exec<{ json: string }>("SELECT json FROM meta WHERE id = 1").toArray()[0];
    this.meta = row ? (JSON.parse(row.json) as SessionMeta) : null;
    this.schemaReady = true;
  }

  saveMeta(): void {
    if (!this.meta) return;
    this.sql.exec(
      "INSERT INTO meta (id, json) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET json = excluded.json",
      JSON.stringify(this.meta),
    );
  }

  /** Create the session's metadata on first use (inside the caller's transaction). */
  private createMeta(init: EnqueueRequest["init"], now: number): SessionMeta {
    const parsed = parseCanonical(this.key, this.cfg);
    this.meta = {
      key: parsed.canonicalKey,
      agentId: parsed.agentId,
      sessionId: crypto.randomUUID(),
      kind: parsed.kind,
      createdAt: now,
      updatedAt: now,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      systemSent: false,
      abortedLastRun: false,
      ...(parsed.kind === "group" && parsed.channel ? { channel: parsed.channel, chatType: parsed.chatType } : {}),
      ...init,
    };
    return this.meta;
  }

  async getMeta(): Promise<SessionMeta | null> {
    return this.meta;
  }

  async getRow(): Promise<SessionRow | null> {
    if (!this.meta) return null;
    return indexEntryOf(this.meta, parseCanonical(this.meta.key, this.cfg)).row;
  }

  /** sessions_spawn, in the child: create this sub-agent session, store its attachments and queue its task — one transaction. */
  async spawnChild(req: SpawnChildRequest): Promise<RunSnapshot> {
    return spawnChildInObject(this, req);
  }

  /** Create the session without a run (spawn and PATCH of a new key use this). Idempotent. */
  async ensureSession(init?: EnqueueRequest["init"]): Promise<SessionMeta> {
    this.ensureSchema();
    if (this.meta) return this.meta;
    this.ctx.storage.transactionSync(() => {
      this.createMeta(init, Date.now());
      this.saveMeta();
    });
    await this.markIndexDirty({ immediate: true });
    return this.meta!;
  }

  async patch(p: {
    label?: string | null;
    modelOverride?: string | null;
    thinkingLevel?: string | null;
    verboseLevel?: string | null;
    sendPolicy?: "allow" | "deny" | null;
  }): Promise<SessionRow> {
    assertOpen(this, this.key);
    await this.ensureSession();
    const m = this.meta!;
    for (const [k, v] of Object.entries(p) as [keyof typeof p, string | null | undefined][]) {
      if (v === undefined) continue;
      if (v === null) delete (m as unknown as Record<string, unknown>)[k];
      else (m as unknown as Record<string, unknown>)[k] = v;
    }
    m.updatedAt = Date.now();
    this.saveMeta();
    await this.markIndexDirty({ immediate: true });
    return (await this.getRow())!;
  }

  /** Delete this session: abort its work, clear its storage and its index row. Never the main session. */
  /** `archivedAs`: the index keeps this row (marked archived, read from the archive) instead of dropping the session. */
  async deleteSession(opts: { allowMain?: boolean; archivedAs?: IndexEntry } = {}): Promise<{ deleted: boolean }> {
    if (!this.meta) return { deleted: false };
    const parsed = parseCanonical(this.meta.key, this.cfg);
    if (parsed.kind === "main" && !opts.allowMain) {
      throw toRpcError(new SwitchboardError("invalid_request", `Cannot delete the main session (${this.meta.key}).`));
    }
    const { agentId, key } = this.meta;
    const release = beginClosing(this, "deleted");
    try {
      await this.clearAll(agentId, key, opts.archivedAs);
    } finally {
      release();
    }
    return { deleted: true };
  }

  private async clearAll(agentId: string, key: string, archivedAs?: IndexEntry): Promise<void> {
    for (const ext of EXTENSIONS) await ext.beforeDelete?.(this);
    this.releaseAllWaiters("aborted", "session deleted");
    const sessionId = this.meta?.sessionId;
    // From here on the object reads as deleted, before anything yields: the run aborted below then
    // records nothing (finishRun) and cannot write an index row that would land after the removal.
    this.meta = null;
    this.schemaReady = false;
    this.active?.abort.abort(new Error("session deleted"));
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    const index = sessionIndex(this.env, this.cfg, agentId);
    // An archived session keeps its (unlisted) row and its sessionId locator, so it still resolves and reads.
    await (archivedAs ? index.upsert(archivedAs, { locatorWritten: false }) : index.remove(key, sessionId));
  }

  // ---------------------------------------------------------------- runs

  /**
   * Queue a run. The run row, the session's creation, the inbound route and the queue's safety timer
   * are one transaction: either the message is durably queued or nothing happened.
   * An `idempotencyKey` seen before returns the run it created — never a second run.
   */
  async enqueue(req: EnqueueRequest, alsoInTransaction?: (host: SessionObject) => void): Promise<RunSnapshot> {
    for (const ext of EXTENSIONS) {
      const check = ext.forwardInbound?.(this, req);
      // Awaited only when a hook had something to look up: ordinary messages never yield here.
      const forwarded = check ? await check : null;
      if (forwarded) return forwarded;
    }
    // No await from here to the transaction: a delete or archive that began is seen (closing.ts).
    assertOpen(this, this.key);
    // Checked before the schema is created: a refused step leaves no storage behind.
    if (req.onlyIfExists && (!this.schemaReady || !this.meta))
      throw toRpcError(new SwitchboardError("not_found", `Session not found: ${this.key}`));
    this.ensureSchema();
    // An owner's standalone `/send on|off|inherit` is a command run (test/token-scopes.test.ts): it takes its turn in
    // the queue like any message, but is answered by the send-policy extension, never by the model.
    if (req.senderIsOwner && req.input.kind === "inbound" && parseSendCommand(req.input.message))
      req = { ...req, input: { ...req.input, kind: "command" } };
    const now = Date.now();
    let created = false;
    const snap = this.ctx.storage.transactionSync((): RunSnapshot => {
      if (req.idempotencyKey) {
        const existing = this.sql
          .exec<RunRow>("SELECT * FROM runs WHERE idempotency_key = ?", req.idempotencyKey)
          .toArray()[0];
        if (existing) return this.snapshot(existing);
      }
      if (!this.meta) {
        this.createMeta(req.init, now);
        created = true;
      }
      const m = this.meta!;
      recordInboundRoute(m, req.input);
      m.updatedAt = now;
      this.saveMeta();
      const id = newRunId(m.key);
      const qseq = this.sql.exec<{ q: number }>("SELECT COALESCE(MAX(qseq), 0) + 1 AS q FROM runs").one().q;
      this.sql.exec(
        `INSERT INTO runs (id, qseq, kind, status, input_json, created_at, idempotency_key) VALUES (?, ?, ?, 'queued', ?, ?, ?)`,
        id,
        qseq,
        req.input.kind,
        JSON.stringify(req.input),
        now,
        req.idempotencyKey ?? null,
      );
      // Safety net: if this instance dies before the queue starts the run, the alarm starts it.
      this.timers.set("pump", "queue", now + LEASE_MS, undefined, { keepEarlier: true });
      // The registry row is stale from here: its write is owed durably, with the change that causes it.
      this.indexSync.schedule(now);
      // State that must exist exactly when this run does (a spawned child's attachments), local callers only.
      alsoInTransaction?.(this);
      const queued = this.snapshot(this.runRow(id)!);
      this.events.run(queued);
      return queued;
    });
    await this.timers.arm();
    // A new session is listed before its first send is answered. A known session's row write is owed by the
    // timer row written above, so it stays off the caller's path (test/index-shards.test.ts).
    const indexed = this.markIndexDirty({ immediate: created });
    if (created) await indexed;
    else
      indexed.catch((err) =>
        log.warn("registry_write_failed", { sessionKey: this.key, error: err, next: "the index timer retries it" }),
      );
    this.kick();
    return snap;
  }

  async getRun(runId: string): Promise<RunSnapshot | null> {
    if (!this.schemaReady) return null;
    const row = this.runRow(runId);
    return row ? this.snapshot(row) : null;
  }

  /**
   * Server-side wait: resolves when the run ends or after `timeoutMs` with the run as it is then.
   * The waiter lives in memory, but the run does not: a caller that lost its connection calls
   * again with the same run id and gets the same outcome.
   */
  async waitRun(runId: string, timeoutMs: number): Promise<RunSnapshot | null> {
    const now = await this.getRun(runId);
    if (!now || FINAL_STATUSES.has(now.status) || timeoutMs <= 0) return now;
    const ms = Math.min(timeoutMs, MAX_WAIT_MS);
    return this.waiters.wait(runId, ms, () => this.snapshot(this.runRow(runId)!));
  }

  async abortRun(runId: string): Promise<RunSnapshot | null> {
    // A session that was never written has no tables: an unknown run is a 404, not a SQL error.
    if (!this.schemaReady) return null;
    const row = this.runRow(runId);
    if (!row) return null;
    if (row.status === "queued" || row.status === "running") {
      if (this.active?.runId === runId) this.active.abort.abort(new Error("aborted"));
      await this.finishRun(runId, { status: "aborted", error: "Run aborted" });
    }
    return this.getRun(runId);
  }

  private snapshotOf(runId: string): RunSnapshot | null {
    const row = this.runRow(runId);
    return row ? this.snapshot(row) : null;
  }

  // ---------------------------------------------------------------- watchers (src/events/session-events.ts)

  /** Only the WebSocket upgrade of an event stream: hibernatable sockets are accepted from a fetch (docs/events.md). */
  async fetch(request: Request): Promise<Response> {
    return this.events.accept(request);
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    this.events.onMessage(ws, message);
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    ws.close(code === 1005 || code === 1006 ? 1000 : code, "closed");
  }

  runRow(runId: string): RunRow | undefined {
    return this.sql.exec<RunRow>("SELECT * FROM runs WHERE id = ?", runId).toArray()[0];
  }

  snapshot(r: RunRow): RunSnapshot {
    const s: RunSnapshot = {
      runId: r.id,
      sessionKey: displayKey(this.key),
      status: r.status,
      kind: r.kind as RunSnapshot["kind"],
      createdAt: r.created_at,
    };
    if (r.reply !== null) s.reply = r.reply;
    if (r.error !== null) s.error = r.error;
    if (r.started_at !== null) s.startedAt = r.started_at;
    if (r.ended_at !== null) s.endedAt = r.ended_at;
    if (r.usage_json) s.usage = JSON.parse(r.usage_json);
    if (r.model) s.model = r.model;
    return s;
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
      .catch((err) => log.error("session_queue_failed", { sessionKey: this.key, error: err }))
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
        if (this.schemaReady) await this.timers.arm();
        return;
      }
      await this.timers.arm();
      await this.execute(run);
    }
  }

  /**
   * Claim the oldest queued run, unless one is already running (FIFO, one at a time: a run whose
   * executor was lost keeps the queue blocked until its lease timer re-queues or ends it).
   */
  private claimNext(): RunRow | null {
    if (!this.schemaReady || !this.meta) return null;
    return this.ctx.storage.transactionSync(() => {
      const running = this.sql.exec("SELECT id FROM runs WHERE status = 'running' LIMIT 1").toArray();
      if (running.length > 0) return null;
      const next = this.sql
        .exec<RunRow>("SELECT * FROM runs WHERE status = 'queued' ORDER BY qseq LIMIT 1")
        .toArray()[0];
      // Nothing queued, or the head is held (its holder kicks the queue and owns the timer that will).
      if (!next || EXTENSIONS.some((e) => e.holdsQueuedRun?.(this, next))) {
        this.timers.clear("pump", "queue");
        return null;
      }
      const now = Date.now();
      const input = JSON.parse(next.input_json) as RunInput;
      this.sql.exec(
        "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?), attempts = attempts + 1 WHERE id = ?",
        now,
        next.id,
      );
      this.timers.set("lease", next.id, now + LEASE_MS);
      const timeoutSeconds = runDeadlineSeconds(input, this.cfg);
      // The deadline is set once, at the first start, so a retried run keeps its original deadline.
      if (next.started_at === null && timeoutSeconds !== null)
        this.timers.set("deadline", next.id, now + timeoutSeconds * 1000, { timeoutSeconds });
      const claimed = this.runRow(next.id)!;
      this.events.run(this.snapshot(claimed));
      return claimed;
    });
  }

  private async execute(run: RunRow): Promise<void> {
    const abort = new AbortController();
    this.active = { runId: run.id, abort };
    const input = JSON.parse(run.input_json) as RunInput;
    try {
      this.writeUserMessage(run, input);
      const result = await this.produceReply(run, input, abort.signal);
      await this.finishRun(run.id, { status: "ok", reply: result.reply, result });
    } catch (err) {
      // A deadline or an abort has already ended the run; finishRun ignores ended runs.
      const message = err instanceof Error ? err.message : String(err);
      await this.finishRun(run.id, { status: "error", error: message || "agent error" });
    } finally {
      if (this.active?.runId === run.id) this.active = null;
    }
  }

  /** The run's inbound message enters the transcript when the run starts (processing order), once. */
  private writeUserMessage(run: RunRow, input: RunInput): void {
    if (run.user_seq !== null || input.kind === "command") return;
    this.ctx.storage.transactionSync(() => {
      const seq = this.transcript.append(userMessageOf(input, shownProvenance), run.id, input.kind);
      this.sql.exec("UPDATE runs SET user_seq = ? WHERE id = ?", seq, run.id);
    });
  }

  /** Produce the assistant reply for a run. Overridden by runtime-specific runners (webhook agents). */
  protected async produceReply(run: RunRow, input: RunInput, signal: AbortSignal): Promise<RunnerResult> {
    for (const ext of EXTENSIONS) {
      const r = ext.produceReply?.(this, run, input, signal);
      if (r) return r;
    }
    return runBuiltinModel(this, input, signal, (messages) => this.recordStep(run.id, messages), {
      onDelta: (text) => this.events.delta(run.id, text),
      onToolCall: (call) => this.events.toolCall(run.id, call),
    });
  }

  /**
   * A finished model step of a running run enters the transcript now, not at the run's end: a run cut
   * short by its deadline or an eviction keeps its tool calls and results (partial-progress announces,
   * a retried run sees what its lost attempt did), and history shows a long run's progress.
   */
  private recordStep(runId: string, messages: TranscriptMessage[]): void {
    if (!this.schemaReady) return;
    this.ctx.storage.transactionSync(() => {
      // A step that finishes after the deadline ended the run is not recorded: the run's outcome is final.
      if (this.runRow(runId)?.status !== "running") return;
      for (const msg of messages) this.transcript.append(msg, runId);
    });
    this.events.stepEnded(runId);
  }

  /**
   * End a run exactly once: record the outcome and the messages it produced, update usage, clear its
   * timers and write its follow-ups — all in one transaction, so a crash between a run's end and its
   * follow-up step loses nothing. A run that already ended (deadline, abort) is left as it is.
   */
  async finishRun(runId: string, outcome: RunOutcome): Promise<void> {
    // The session was deleted while this run was in flight: there is nothing left to record.
    if (!this.schemaReady) return;
    outcome = capReplyAndError(outcome, this.cfg.limits.maxMessageBytes);
    const ended = this.ctx.storage.transactionSync((): RunEndedEvent | null => {
      const row = this.runRow(runId);
      if (!row || FINAL_STATUSES.has(row.status)) return null;
      const now = Date.now();
      const input = JSON.parse(row.input_json) as RunInput;
      const m = this.meta!;
      const res = outcome.result;
      const ok = Boolean(res) && outcome.status === "ok";
      if (res && ok) {
        for (const msg of res.messages) this.transcript.append(msg, runId);
        m.systemSent = true;
      } else if (row.status === "running") {
        // The transcript records failed and cut-short runs too, as OpenClaw does (stopReason error/aborted).
        this.transcript.append(runEndedWithoutReply(m.model, outcome, now), runId);
      }
      const spent = endedRunUsage(this.sql, runId, res, ok);
      if (spent) addRunUsage(m, this.cfg, spent.usage, ok ? res : undefined);
      m.abortedLastRun = outcome.status === "aborted" || outcome.status === "timeout";
      m.updatedAt = now;
      this.saveMeta();
      this.sql.exec(
        "UPDATE runs SET status = ?, reply = ?, error = ?, usage_json = ?, model = ?, ended_at = ? WHERE id = ?",
        outcome.status,
        outcome.reply ?? null,
        outcome.error ?? null,
        spent ? JSON.stringify(spent.usage) : null,
        spent?.model ?? null,
        now,
        runId,
      );
      this.timers.clear("lease", runId);
      this.timers.clear("deadline", runId);
      this.indexSync.schedule(now);
      const event: RunEndedEvent = { run: this.snapshot(this.runRow(runId)!), input };
      this.events.run(event.run);
      this.onRunEnded(event);
      return event;
    });
    if (!ended) return;
    await this.timers.arm();
    // A session going idle writes its row before waiters wake, so a client that waited on the run
    // lists it with the run's usage and model; a busy session (queue not empty) stays coalesced.
    const idle = this.sql.exec("SELECT 1 FROM runs WHERE status = 'queued' LIMIT 1").toArray().length === 0;
    await this.markIndexDirty({ immediate: idle });
    this.waiters.release(runId, ended.run);
    this.afterRunEnded(ended);
    this.kick();
  }

  /** Follow-ups written in the run-ending transaction (flows, deliveries), by the registered extensions. */
  private onRunEnded(event: RunEndedEvent): void {
    for (const ext of EXTENSIONS) ext.onRunEnded?.(this, event);
  }

  /** Work started after the run-ending transaction committed (e.g. attempt a delivery now). */
  private afterRunEnded(event: RunEndedEvent): void {
    for (const ext of EXTENSIONS) {
      if (!ext.afterRunEnded) continue;
      void Promise.resolve(ext.afterRunEnded(this, event)).catch((err) =>
        log.error("after_run_ended_failed", {
          sessionKey: this.key,
          runId: event.run.runId,
          extension: ext.name,
          error: err,
        }),
      );
    }
  }

  private releaseAllWaiters(status: RunStatus, error: string): void {
    this.waiters.releaseAll((runId) => {
      const row = this.runRow(runId);
      return row
        ? { ...this.snapshot(row), status, error }
        : ({ runId, sessionKey: displayKey(this.key), status, error, kind: "inbound", createdAt: 0 } as RunSnapshot);
    });
  }

  // ---------------------------------------------------------------- transcript reads

  /**
   * One byte-budgeted page of history heads (transcript.ts) with the target's lineage, in one round trip.
   * `onlyIfSpawnedBy`: the caller may read this session only as its parent — checked before anything
   * of the transcript is read; otherwise the answer is `denied` and carries nothing of the session.
   */
  async history(opts: {
    limit: number;
    before?: number;
    includeTools: boolean;
    maxBytes: number;
    onlyIfSpawnedBy?: string;
  }): Promise<BudgetedPage & { sessionId?: string; spawnedBy?: string; denied?: true }> {
    const empty: BudgetedPage = { messages: [], hasMore: false, nextBefore: null, cutByBytes: false };
    if (opts.onlyIfSpawnedBy !== undefined && this.meta?.spawnedBy !== opts.onlyIfSpawnedBy)
      return { ...empty, denied: true };
    if (!this.schemaReady || !this.meta) return empty;
    return { ...this.transcript.page(opts), sessionId: this.meta.sessionId, spawnedBy: this.meta.spawnedBy };
  }

  /** The next chunk of the JSONL export after `afterSeq` (at most TRANSCRIPT_CHUNK_BYTES, or one larger message). */
  async transcriptChunk(afterSeq: number): Promise<{ chunk: string; lastSeq: number | null }> {
    if (!this.schemaReady) return { chunk: "", lastSeq: null };
    return this.transcript.exportChunk(afterSeq, TRANSCRIPT_CHUNK_BYTES);
  }

  /**
   * Typed RPC stays one method per concern: extensions expose their calls here instead of growing this
   * class (and this module never imports them, so there is no import cycle).
   */
  async extensionCall(name: string, method: string, arg?: unknown): Promise<unknown> {
    const fn = EXTENSIONS.find((e) => e.name === name)?.rpc?.[method];
    if (!fn) throw toRpcError(new SwitchboardError("not_found", `Unknown extension call: ${name}.${method}`));
    return await fn(this, arg);
  }

  // ---------------------------------------------------------------- alarm & timers

  async alarm(): Promise<void> {
    if (!this.schemaReady) return;
    // Failures are retried with backoff up to each kind's attempt limit, then the timer is dead (timer-policy.ts).
    await runDueTimers(this, (t) => this.onTimer(t));
    if (!this.schemaReady) return;
    this.schedulePrune();
    await this.timers.arm();
  }

  private finishedFlowStates(): FinishedFlowStates {
    return Object.assign({}, ...EXTENSIONS.map((e) => e.finishedFlows ?? {}));
  }

  /**
   * Arm the retention timer when finished rows exist and it is not armed yet. Checked on the alarm, which
   * every flow and delivery step goes through; a session with nothing finished gets no extra alarm.
   */
  private schedulePrune(): void {
    if (this.timers.get(PRUNE_TIMER, PRUNE_REF)) return;
    const next = nextPruneDue(this.sql, this.finishedFlowStates());
    if (next !== null) this.timers.set(PRUNE_TIMER, PRUNE_REF, next);
  }

  /** Dispatch one due timer. Each handler deletes or reschedules its row in the transaction of its effect. */
  protected async onTimer(t: TimerRow): Promise<void> {
    switch (t.kind) {
      case "pump":
        this.timers.clear("pump", "queue");
        this.kick();
        return;
      case "lease":
        return this.onLeaseExpired(t.ref);
      case "deadline": {
        const row = this.runRow(t.ref);
        this.timers.clear("deadline", t.ref);
        if (!row || FINAL_STATUSES.has(row.status)) return;
        if (this.active?.runId === t.ref) this.active.abort.abort(new Error("deadline"));
        // Report the deadline the run was given (the timer's payload), not the wall time the alarm fired at.
        const given = t.payload ? (JSON.parse(t.payload) as { timeoutSeconds?: number }).timeoutSeconds : undefined;
        const secs = given ?? Math.round(((Date.now() - (row.started_at ?? row.created_at)) / 1000) * 10) / 10;
        await this.finishRun(t.ref, { status: "timeout", error: `Run timed out after ${secs}s` });
        return;
      }
      case PRUNE_TIMER: {
        const next = pruneFinished(this.sql, this.finishedFlowStates(), Date.now());
        if (next === null) this.timers.clear(PRUNE_TIMER, PRUNE_REF);
        else this.timers.set(PRUNE_TIMER, PRUNE_REF, next);
        return;
      }
      case "index":
        // syncIndex clears the row only after the write succeeded; a failure is retried by alarm().
        await this.syncIndex();
        return;
      default:
        for (const ext of EXTENSIONS) if (ext.onTimer && (await ext.onTimer(this, t))) return;
        log.warn("unknown_timer_kind", { sessionKey: this.key, kind: t.kind, ref: t.ref });
        this.timers.clear(t.kind, t.ref);
    }
  }

  /**
   * A lease expired. If this instance is still executing the run, renew it. Otherwise the executor was
   * lost (eviction, restart): retry once, then end the run with an error — never "running" forever.
   */
  private async onLeaseExpired(runId: string): Promise<void> {
    const row = this.runRow(runId);
    if (row?.status !== "running") {
      this.timers.clear("lease", runId);
      return;
    }
    if (this.active?.runId === runId) {
      this.timers.set("lease", runId, Date.now() + LEASE_MS);
      return;
    }
    // Held by an external runtime (see SessionExtension.holdsRun): nothing was lost, retrying would run it twice.
    if (EXTENSIONS.some((e) => e.holdsRun?.(this, runId))) {
      this.timers.clear("lease", runId);
      return;
    }
    if (row.attempts < 2) {
      this.ctx.storage.transactionSync(() => {
        this.sql.exec("UPDATE runs SET status = 'queued' WHERE id = ?", runId);
        this.events.run(this.snapshot(this.runRow(runId)!));
        this.timers.clear("lease", runId);
      });
      this.kick();
      return;
    }
    await this.finishRun(runId, {
      status: "error",
      error: "Run was interrupted by a restart and could not be resumed",
    });
  }

  // ---------------------------------------------------------------- registry sync (src/session/index-sync.ts)

  markIndexDirty(opts: { immediate?: boolean } = {}): Promise<void> {
    return this.indexSync.markDirty(opts);
  }

  syncIndex(): Promise<void> {
    return this.indexSync.sync();
  }
}

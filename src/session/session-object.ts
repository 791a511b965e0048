import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { SwitchboardError, toRpcError } from "../errors";
import { SessionEvents } from "../events/session-events";
import { sessionExtensions } from "../extensions";
import { displayKey, parseCanonical } from "../keys";
import { type IndexEntry, indexEntryOf, type SessionRow } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import { refuseIfArchived } from "../spawn/archive-delete";
import { type SpawnChildRequest, spawnChildInObject } from "../spawn/child-spawn";
import { runAlarm } from "./alarm";
import type { SessionAudit } from "./audit-types";
import { TRANSCRIPT_CHUNK_BYTES } from "./byte-budget";
import { assertOpen, beginClosing } from "./closing";
import { enqueueRun, newSessionMeta } from "./enqueue";
import type { SessionExtensions } from "./extensions";
import type { SessionHost } from "./host";
import { type IndexDirty, IndexSync } from "./index-sync";
import { auditSession } from "./run-audit";
import { RunQueue } from "./run-queue";
import type { RunOutcome, RunRow } from "./run-types";
import { migrate } from "./schema";
import type { TimerKinds } from "./timer-policy";
import { Timers } from "./timers";
import { type BudgetedPage, Transcript } from "./transcript";
import type { DeadDelivery, EnqueueRequest, RunSnapshot, SessionMeta, TranscriptMessage } from "./types";

/**
 * One Durable Object per canonical session key (docs/architecture.md). It owns the session's metadata, transcript,
 * run queue, timers and outbox in SQLite, runs one run at a time in FIFO order, and keeps its registry
 * row current. Every method is typed RPC; `fetch` only accepts event-stream WebSockets (docs/events.md).
 *
 * This class is wiring: the run queue (run-queue.ts), enqueueing (enqueue.ts), the alarm (alarm.ts), the
 * registry row (index-sync.ts) and the extensions — runners, flows, outbox, sub-agents, listed in
 * src/extensions.ts — each live in their own module and see the object only through its host surface (host.ts).
 */
export class SessionObject extends DurableObject<Env> implements SessionHost {
  /** The extensions this class is made of (src/extensions.ts); a subclass may add its own (bench/worker.ts). */
  static extensions: SessionExtensions = sessionExtensions;
  readonly extensions: SessionExtensions = (this.constructor as typeof SessionObject).extensions;
  readonly sql: SqlStorage;
  readonly timers: Timers;
  readonly transcript: Transcript;
  readonly events: SessionEvents;
  meta: SessionMeta | null = null;
  private schemaReady = false;
  private readonly indexSync = new IndexSync(this);
  private readonly queue = new RunQueue(this, this.indexSync, this.extensions);

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.timers = new Timers(this.sql, ctx.storage, (kind) => this.timerKinds.has(kind));
    this.events = new SessionEvents(this.sql, ctx, {
      hasSession: () => this.schemaReady && this.meta !== null,
      incarnation: () => this.meta?.sessionId ?? null,
      runSnapshot: (runId) => (this.schemaReady ? this.snapshotOf(runId) : null),
      stateChanged: (seq, change) => this.extensions.onStateChange(this, seq, change),
    });
    this.transcript = new Transcript(
      this.sql,
      () => this.cfg.limits.maxMessageBytes,
      (seq, runId, head, message, row) => {
        this.events.message(seq, runId, head, message);
        this.extensions.onTranscriptAppend(this, { seq, ...row });
      },
    );
    // Reads of a session that was never written must not create storage, so the schema is only
    // created by the first write; an existing schema is migrated before any call is served.
    ctx.blockConcurrencyWhile(async () => {
      const exists =
        this.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").toArray()
          .length > 0;
      // A migration may write timer rows without the alarm that runs them (the search feed's, due at once,
      // src/session/schema.ts): arm it now, or a session that is only read after an upgrade would wait for its
      // next write to run them (docs/timers.md, "Migrations"). Only when a step ran: a current schema costs no alarm read.
      if (exists && this.ensureSchema() > 0) await this.timers.arm();
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

  get timerKinds(): TimerKinds {
    return this.extensions.timerKinds;
  }

  get hasStorage(): boolean {
    return this.schemaReady;
  }

  isWatched(): boolean {
    // Every WebSocket this object accepts is a watcher of one of its streams (src/events/session-events.ts).
    return this.ctx.getWebSockets().length > 0;
  }

  /** Answers how many migration steps ran (0 when the schema was current or new, or already checked). */
  private ensureSchema(): number {
    if (this.schemaReady) return 0;
    const ran = migrate(this.sql);
    const row = this.sql.exec<{ json: string }>("SELECT json FROM meta WHERE id = 1").toArray()[0];
    this.meta = row ? (JSON.parse(row.json) as SessionMeta) : null;
    this.schemaReady = true;
    return ran;
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
    this.meta = newSessionMeta(this.key, this.cfg, init, now);
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

  /**
   * Create the session without a run (spawn and PATCH of a new key use this). Idempotent. Refuses (409) while
   * the session is being deleted or archived, like every writer (closing.ts): a caller that writes after it
   * must check again after its own awaits (`assertOpen`), since the close may begin during them.
   */
  async ensureSession(init?: EnqueueRequest["init"]): Promise<SessionMeta> {
    assertOpen(this, this.key);
    if (this.meta) return this.meta;
    await refuseIfArchived(this);
    assertOpen(this, this.key);
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
    await this.extensions.beforeDelete(this);
    this.queue.releaseAllWaiters("aborted", "session deleted");
    const sessionId = this.meta?.sessionId;
    // From here on the object reads as deleted, before anything yields: the run aborted below then
    // records nothing (finishRun) and cannot write an index row that would land after the removal.
    this.meta = null;
    this.schemaReady = false;
    this.queue.abortActive("session deleted");
    // Before the storage goes: watchers learn why their stream ends, and no resume id outlives it.
    this.events.endAll(archivedAs ? "archived" : "deleted");
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    this.timers.forgetArmed();
    const index = sessionIndex(this.env, this.cfg, agentId);
    // An archived session keeps its (unlisted) row and its sessionId locator, so it still resolves and reads.
    await (archivedAs ? index.upsert(archivedAs, { locatorWritten: false }) : index.remove(key, sessionId));
  }

  // ---------------------------------------------------------------- runs (run-queue.ts, enqueue.ts)

  /** Queue a run (enqueue.ts): one transaction, idempotent by `idempotencyKey`. */
  async enqueue(
    req: EnqueueRequest,
    alsoInTransaction?: (host: SessionHost, queued: RunSnapshot) => void,
  ): Promise<RunSnapshot> {
    // An archived sub-agent's key is read-only until deleted (src/spawn/archive-delete.ts); a spawn makes a new key.
    await refuseIfArchived(this, Boolean(req.init?.subagent));
    const steps = {
      ensureSchema: () => this.ensureSchema(),
      createMeta: (init: EnqueueRequest["init"], now: number) => this.createMeta(init, now),
      indexSync: this.indexSync,
      extensions: this.extensions,
    };
    return enqueueRun(this, steps, req, alsoInTransaction);
  }

  async getRun(runId: string): Promise<RunSnapshot | null> {
    if (!this.schemaReady) return null;
    const row = this.runRow(runId);
    return row ? this.snapshot(row) : null;
  }

  /** Server-side wait, up to MAX_WAIT_MS (run-types.ts); a caller that lost its connection calls again. */
  async waitRun(runId: string, timeoutMs: number): Promise<RunSnapshot | null> {
    return this.queue.wait(runId, timeoutMs);
  }

  async abortRun(runId: string): Promise<RunSnapshot | null> {
    // A session that was never written has no tables: an unknown run is a 404, not a SQL error.
    if (!this.schemaReady) return null;
    await this.queue.abort(runId);
    return this.getRun(runId);
  }

  /**
   * What moves each open run and flow of this session on (src/session/run-audit.ts), without acting on it
   * (a flow whose timer went missing gets it back). The sweep timer acts on the same audit.
   */
  async audit(): Promise<SessionAudit> {
    if (!this.schemaReady) return { runs: [], flows: [] };
    const audit = this.ctx.storage.transactionSync(() => auditSession(this, this.extensions, this.queue.executing));
    await this.timers.arm();
    return audit;
  }

  private snapshotOf(runId: string): RunSnapshot | null {
    const row = this.runRow(runId);
    return row ? this.snapshot(row) : null;
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
    // A spawn's task run names its ledger task, so every surface that holds the run id (an MCP task, A2A,
    // REST) reaches the ledger's cascade cancel without a lookup (src/tasks/run-abort.ts).
    const taskId = this.meta?.subagent?.taskId;
    if (taskId && r.kind === "subagent_task") s.taskId = taskId;
    return s;
  }

  kick(): void {
    this.queue.kick();
  }

  finishRun(runId: string, outcome: RunOutcome): Promise<void> {
    return this.queue.finishRun(runId, outcome);
  }

  recordStep(runId: string, messages: TranscriptMessage[]): void {
    this.queue.recordStep(runId, messages);
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
    offset?: number;
    /** Anchored read around this seq (sessions_history `messageId`; transcript.ts pageAround). */
    around?: number;
    includeTools: boolean;
    maxBytes: number;
    onlyIfSpawnedBy?: string;
  }): Promise<BudgetedPage & { sessionId?: string; spawnedBy?: string; denied?: true }> {
    const empty: BudgetedPage = { messages: [], hasMore: false, nextBefore: null, cutByBytes: false };
    if (opts.onlyIfSpawnedBy !== undefined && this.meta?.spawnedBy !== opts.onlyIfSpawnedBy)
      return { ...empty, denied: true };
    if (!this.schemaReady || !this.meta) return empty;
    const page =
      opts.around !== undefined
        ? this.transcript.pageAround({ ...opts, anchor: opts.around })
        : this.transcript.page(opts);
    return { ...page, sessionId: this.meta.sessionId, spawnedBy: this.meta.spawnedBy };
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
    return this.extensions.call(this, name, method, arg);
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

  // ---------------------------------------------------------------- alarm (alarm.ts) & registry row (index-sync.ts)

  async alarm(): Promise<void> {
    await runAlarm(this, { queue: this.queue, indexSync: this.indexSync, extensions: this.extensions });
  }

  markIndexDirty(opts: IndexDirty = {}): Promise<void> {
    return this.indexSync.markDirty(opts);
  }

  syncIndex(): Promise<void> {
    return this.indexSync.sync();
  }

  deliveryDead(delivery: DeadDelivery): Promise<void> {
    return this.extensions.deliveryDead(this, delivery);
  }
}

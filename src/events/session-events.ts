import type { RunInput, RunSnapshot, TranscriptMessage } from "../session/types";
import { CommitGate } from "./commit-gate";
import { eventId, resumeAfter } from "./event-ids";
import { EventLog, type SessionEventType, sseBlock } from "./event-log";
import { EVENT_LIMITS, MORE, NEXT } from "./limits";
import { authTag, RunStreams, resetBlock, runTag } from "./run-stream";
import { send } from "./socket-send";
import { endedRunChange, messageChange, queuedRunChange, type StateChange } from "./state-kinds";

/** What a watcher's socket remembers across hibernation (its serialized attachment). */
type Watcher = { kind: "session"; cursor: number; live: boolean } | { kind: "run"; runId: string };

/**
 * Why a stream ended before its natural end: the data of its last event, `end` (docs/events.md). The
 * object sends these; the Worker's bridge sends `lifetime` (src/events/sse-bridge.ts).
 */
export type StreamEndReason = "deleted" | "archived" | "token_expired";

const SESSION_TAG = "session";

/** What this module needs of its session object: whether the session exists, its incarnation, its runs. */
export interface EventsHost {
  hasSession(): boolean;
  /** The session's `sessionId`: new each time the key's session is created again (event-ids.ts). */
  incarnation(): string | null;
  runSnapshot(runId: string): RunSnapshot | null;
  /** A state change was written at `seq`, inside its transaction (the extensions' `onStateChange`). */
  stateChanged?(seq: number, change: StateChange): void;
}

/** What waits for its transaction to commit (commit-gate.ts). */
type Committed = { seq: number; type: SessionEventType; data: string } | { runEnded: RunSnapshot };

/**
 * The session's watchers (docs/events.md). Each is a hibernatable WebSocket from the Worker, which turns it
 * into SSE. Events are written to SQLite with their change (event-log.ts) and sent to the sockets from
 * memory once that change's transaction has committed (commit-gate.ts), so watching costs no storage read
 * per event, and an idle watched session can hibernate: the sockets and their attachments survive it.
 */
export class SessionEvents {
  readonly log: EventLog;
  /** The runs' own streams (text, tool calls, status; run-stream.ts): the runner writes to them directly. */
  readonly runs: RunStreams;
  private readonly gate: CommitGate<Committed>;

  constructor(
    sql: SqlStorage,
    private readonly ctx: DurableObjectState,
    private readonly host: EventsHost,
  ) {
    this.log = new EventLog(sql);
    this.runs = new RunStreams(ctx);
    this.gate = new CommitGate<Committed>(ctx.storage, (items) => this.publish(items));
  }

  // ------------------------------------------------------------ recording (inside the change's transaction)

  /**
   * A transcript append: the history head (`headJson`, already sanitised) annotated like a history item.
   * `message`, when given, tells whether the append is also a state change (a compaction marker).
   */
  message(seq: number, runId: string | null, headJson: string, message?: TranscriptMessage): void {
    const tag = `,"__switchboard":{"seq":${seq},"runId":${JSON.stringify(runId)}}}`;
    const state = message ? messageChange(message, runId) : null;
    this.record("message", headJson.endsWith("}") ? headJson.slice(0, -1) + tag : headJson, state);
  }

  /** `input`: the run's input, given where the run is admitted and where it ends — what makes it a state change. */
  run(s: RunSnapshot, input?: RunInput): void {
    const data = {
      runId: s.runId,
      status: s.status,
      kind: s.kind,
      createdAt: s.createdAt,
      ...(s.startedAt !== undefined ? { startedAt: s.startedAt } : {}),
      ...(s.endedAt !== undefined ? { endedAt: s.endedAt } : {}),
      ...(s.error !== undefined ? { error: s.error } : {}),
    };
    const state = !input ? null : s.status === "queued" ? queuedRunChange(s, input) : endedRunChange(s);
    this.record("run", JSON.stringify(data), state);
    if (s.status !== "queued" && s.status !== "running") this.gate.afterCommit({ runEnded: s });
  }

  delivery(d: {
    id: string;
    status: string;
    kind: string;
    channel: string;
    attempts: number;
    error: string | null;
  }): void {
    const data = {
      deliveryId: d.id,
      status: d.status,
      kind: d.kind,
      channel: d.channel,
      attempts: d.attempts,
      ...(d.error ? { error: d.error } : {}),
    };
    this.record("delivery", JSON.stringify(data));
  }

  /**
   * A task of this session's ledger was recorded or changed (src/tasks/task-api.ts): `record` is the task as
   * `GET /v1/tasks/{id}` serves it; `state`, when its status moved, the state change that also is.
   */
  task(record: { taskId: string }, state: StateChange | null): void {
    this.record("task", JSON.stringify(record), state);
  }

  private record(type: SessionEventType, data: string, state: StateChange | null = null): void {
    this.gate.offer(
      () => {
        const seq = this.log.append(type, data, state);
        // In the same transaction as the change: what must follow it (a watcher's notice) commits with it.
        if (state) this.host.stateChanged?.(seq, state);
        return seq;
      },
      (seq) => ({ seq, type, data }),
    );
  }

  /** A transaction committed: send its events to the live session watchers in seq order, end its runs' streams. */
  private publish(items: Committed[]): void {
    const events = items.filter((i) => "seq" in i);
    const incarnation = this.host.incarnation();
    if (events.length > 0 && incarnation !== null) {
      const blocks = events.map((e) => ({ seq: e.seq, block: sseBlock(eventId(incarnation, e.seq), e.type, e.data) }));
      for (const ws of this.ctx.getWebSockets(SESSION_TAG)) {
        const w = ws.deserializeAttachment() as Watcher;
        if (w.kind !== "session" || !w.live) continue;
        // The replay guard: a page that already carried an event (read before its publication) moved the
        // cursor past it, so it is not sent twice (test/events/events-commit.test.ts).
        let text = "";
        for (const e of blocks) if (e.seq > w.cursor) text += e.block;
        if (text) send(ws, text);
      }
    }
    for (const i of items)
      if ("runEnded" in i) {
        this.runs.ended(i.runEnded);
        this.endAuthorizedBy(i.runEnded.runId);
      }
  }

  /** The run whose token opened these streams ended, and its token with it: their authority is gone (docs/events.md). */
  private endAuthorizedBy(runId: string): void {
    const block = sseBlock(null, "end", JSON.stringify({ reason: "token_expired" satisfies StreamEndReason }));
    for (const ws of this.ctx.getWebSockets(authTag(runId))) {
      send(ws, block);
      try {
        ws.close(1000, "token expired");
      } catch {
        /* already closed */
      }
    }
  }

  // ------------------------------------------------------------ watchers

  /**
   * The session's storage is about to be deleted (delete, archive): every watcher of either stream gets
   * a last event, `end` with the reason, and is closed. Its resume id would mean nothing to a session
   * created again under the key (event-ids.ts).
   */
  endAll(reason: StreamEndReason): void {
    const block = sseBlock(null, "end", JSON.stringify({ reason }));
    for (const ws of this.ctx.getWebSockets()) {
      send(ws, block);
      try {
        ws.close(1000, `session ${reason}`);
      } catch {
        /* already closed */
      }
    }
    this.runs.clear();
  }

  /**
   * Accept a watcher (the Worker's WebSocket upgrade; docs/events.md). `after`: its resume id (null = live
   * from now). The session stream starts with its replay, one bounded page at a time; the run stream with
   * what run-stream.ts keeps of the run.
   */
  accept(request: Request): Response {
    const req = watchRequestOf(request);
    const incarnation = this.host.incarnation();
    if (!this.host.hasSession() || incarnation === null) return errorResponse(404, "not_found", "Session not found");
    let run: RunSnapshot | null = null;
    if (req.stream === "run") {
      run = this.host.runSnapshot(req.runId);
      if (!run) return errorResponse(404, "not_found", `Run not found: ${req.runId}`);
    }
    // Opened with a run token: it was checked a moment ago, but its run may have ended since; the stream
    // is tagged so that it ends when the run does.
    const tags: string[] = [];
    if (req.authRun !== null) {
      const auth = this.host.runSnapshot(req.authRun);
      if (!auth || (auth.status !== "queued" && auth.status !== "running"))
        return errorResponse(401, "unauthorized", `Run token no longer valid: run ${req.authRun} has ended`);
      tags.push(authTag(req.authRun));
    }
    if (this.ctx.getWebSockets().length >= EVENT_LIMITS.maxWatchersPerSession)
      return errorResponse(
        429,
        "rate_limited",
        `Too many watchers of this session (at most ${EVENT_LIMITS.maxWatchersPerSession}, docs/limits.md); close one and retry.`,
      );
    const { 0: client, 1: server } = new WebSocketPair();
    if (run) {
      this.ctx.acceptWebSocket(server, [runTag(run.runId), ...tags]);
      server.serializeAttachment({ kind: "run", runId: run.runId } satisfies Watcher);
      this.runs.start(server, run, req.after);
    } else {
      this.ctx.acceptWebSocket(server, [SESSION_TAG, ...tags]);
      this.startSession(server, incarnation, req.after);
    }
    return new Response(null, { status: 101, webSocket: client });
  }

  private startSession(ws: WebSocket, incarnation: string, resume: string | null): void {
    const newest = this.log.lastSeq();
    if (resume === null) {
      ws.serializeAttachment({ kind: "session", cursor: newest, live: true } satisfies Watcher);
      return;
    }
    const at = resumeAfter(resume, incarnation);
    // A resume id of another incarnation, or past the newest event, is no position here: skipping
    // "after" it would skip events the client never saw. Start over instead.
    if (at === "foreign" || at.after > newest) {
      send(ws, resetBlock(resume));
      this.sendPage(ws, 0);
      return;
    }
    let cursor = at.after;
    const oldest = this.log.oldestSeq();
    if (oldest !== null && cursor < oldest - 1) {
      const gap = { lastEventId: resume, oldestId: eventId(incarnation, oldest) };
      send(ws, sseBlock(null, "gap", JSON.stringify(gap)));
      cursor = oldest - 1;
    }
    this.sendPage(ws, cursor);
  }

  /** The Worker asks for the next replay page once the reader has room (flow control of a replay). */
  onMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    if (message !== NEXT) return;
    const w = ws.deserializeAttachment() as Watcher;
    if (w.kind === "session" && !w.live) this.sendPage(ws, w.cursor);
  }

  /**
   * One replay page from SQLite. Synchronous from read to attachment, so no event can fall between the
   * page and going live: an event written later has a seq past the cursor and is sent by `publish`.
   */
  private sendPage(ws: WebSocket, cursor: number): void {
    const incarnation = this.host.incarnation();
    if (incarnation === null) return;
    const page = this.log.page(cursor, incarnation);
    ws.serializeAttachment({ kind: "session", cursor: page.cursor, live: !page.more } satisfies Watcher);
    if (page.text) send(ws, page.text);
    if (page.more) send(ws, MORE);
  }
}

/** What the Worker asked for (src/http/routes/events.ts builds these URLs); `authRun`: the run whose token opened it. */
function watchRequestOf(
  request: Request,
): ({ stream: "session" } | { stream: "run"; runId: string }) & { after: string | null; authRun: string | null } {
  const url = new URL(request.url);
  const runId = url.searchParams.get("runId");
  const after = url.searchParams.get("after");
  const authRun = url.searchParams.get("authRun");
  if (url.searchParams.get("stream") === "run" && runId) return { stream: "run", runId, after, authRun };
  return { stream: "session", after, authRun };
}

function errorResponse(status: number, type: string, message: string): Response {
  return Response.json({ ok: false, error: { type, message } }, { status });
}

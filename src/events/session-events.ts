import type { RunSnapshot } from "../session/types";
import { EventLog, type SessionEventType, sseBlock } from "./event-log";
import { EVENT_LIMITS, MORE, NEXT } from "./limits";

/** What a watcher's socket remembers across hibernation (its serialized attachment). */
type Watcher = { kind: "session"; cursor: number; live: boolean } | { kind: "run"; runId: string };

const SESSION_TAG = "session";
const runTag = (runId: string) => `run:${runId}`;

/** What this module needs of its session object: whether the session exists, and its runs. */
export interface EventsHost {
  hasSession(): boolean;
  runSnapshot(runId: string): RunSnapshot | null;
}

/**
 * The session's watchers (docs/events.md). Each is a hibernatable WebSocket from the Worker, which turns it
 * into SSE. Events are written to SQLite with their change (event-log.ts) and sent to the sockets from
 * memory after the transaction, so watching costs no storage read per event, and an idle watched
 * session can hibernate: the sockets and their attachments survive it.
 */
export class SessionEvents {
  readonly log: EventLog;
  /** Events written in the current transaction, sent once it has committed (a microtask later). */
  private pending: { seq: number; data: string; block: string }[] = [];
  /** The text of each running run's current model step, for a watcher that joins mid-run. Memory only. */
  private readonly stepText = new Map<string, string>();

  constructor(
    sql: SqlStorage,
    private readonly ctx: DurableObjectState,
    private readonly host: EventsHost,
  ) {
    this.log = new EventLog(sql);
  }

  // ------------------------------------------------------------ recording (inside the change's transaction)

  /** A transcript append: the history head (`headJson`, already sanitised) annotated like a history item. */
  message(seq: number, runId: string | null, headJson: string): void {
    const tag = `,"__switchboard":{"seq":${seq},"runId":${JSON.stringify(runId)}}}`;
    this.record("message", headJson.endsWith("}") ? headJson.slice(0, -1) + tag : headJson);
  }

  run(s: RunSnapshot): void {
    const data = {
      runId: s.runId,
      status: s.status,
      kind: s.kind,
      createdAt: s.createdAt,
      ...(s.startedAt !== undefined ? { startedAt: s.startedAt } : {}),
      ...(s.endedAt !== undefined ? { endedAt: s.endedAt } : {}),
      ...(s.error !== undefined ? { error: s.error } : {}),
    };
    this.record("run", JSON.stringify(data));
    if (s.status !== "queued" && s.status !== "running") queueMicrotask(() => this.runEnded(s));
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

  private record(type: SessionEventType, data: string): void {
    const seq = this.log.append(type, data);
    if (this.pending.length === 0) queueMicrotask(() => this.flush());
    this.pending.push({ seq, data, block: sseBlock(seq, type, data) });
  }

  /** Send the committed events to the live session watchers, in seq order. */
  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    const watchers = this.ctx
      .getWebSockets(SESSION_TAG)
      .map((ws) => ({ ws, w: ws.deserializeAttachment() as Watcher }))
      .filter(({ w }) => w.kind === "session" && w.live);
    if (watchers.length === 0) return;
    const committed = this.log.committed(batch);
    for (const { ws, w } of watchers) {
      if (w.kind !== "session") continue;
      // A page read between the write and this flush already carried the events up to its cursor.
      let text = "";
      for (const e of committed) if (e.seq > w.cursor) text += e.block;
      if (text) send(ws, text);
    }
  }

  // ------------------------------------------------------------ run text (memory only, never stored)

  delta(runId: string, text: string): void {
    if (!text) return;
    this.stepText.set(runId, (this.stepText.get(runId) ?? "") + text);
    const block = sseBlock(null, "delta", JSON.stringify({ text }));
    for (const ws of this.ctx.getWebSockets(runTag(runId))) send(ws, block);
  }

  toolCall(runId: string, call: { toolCallId: string; toolName: string; args: unknown }): void {
    const block = sseBlock(null, "tool-call", JSON.stringify(call));
    for (const ws of this.ctx.getWebSockets(runTag(runId))) send(ws, block);
  }

  /** A model step finished: the next delta starts a new step's text. */
  stepEnded(runId: string): void {
    this.stepText.delete(runId);
  }

  private runEnded(s: RunSnapshot): void {
    this.stepText.delete(s.runId);
    for (const ws of this.ctx.getWebSockets(runTag(s.runId))) {
      send(ws, statusBlock(s));
      ws.close(1000, "run ended");
    }
  }

  // ------------------------------------------------------------ watchers

  /**
   * Accept a watcher (the Worker's WebSocket upgrade; docs/events.md). `after`: the resume point of a
   * session watcher (null = live from now). The session stream starts with its replay, one bounded page
   * at a time; the run stream with the run's text so far, or its whole result when it has ended.
   */
  accept(request: Request): Response {
    const req = watchRequestOf(request);
    if (!this.host.hasSession()) return errorResponse(404, "not_found", "Session not found");
    let run: RunSnapshot | null = null;
    if (req.stream === "run") {
      run = this.host.runSnapshot(req.runId);
      if (!run) return errorResponse(404, "not_found", `Run not found: ${req.runId}`);
    }
    if (this.ctx.getWebSockets().length >= EVENT_LIMITS.maxWatchersPerSession)
      return errorResponse(
        429,
        "rate_limited",
        `Too many watchers of this session (at most ${EVENT_LIMITS.maxWatchersPerSession}, docs/limits.md); close one and retry.`,
      );
    const { 0: client, 1: server } = new WebSocketPair();
    if (req.stream === "run" && run) {
      this.ctx.acceptWebSocket(server, [runTag(run.runId)]);
      server.serializeAttachment({ kind: "run", runId: run.runId } satisfies Watcher);
      if (run.status === "queued" || run.status === "running") {
        const soFar = this.stepText.get(run.runId);
        if (soFar) send(server, sseBlock(null, "delta", JSON.stringify({ text: soFar })));
      } else {
        if (run.reply) send(server, sseBlock(null, "delta", JSON.stringify({ text: run.reply })));
        send(server, statusBlock(run));
        server.close(1000, "run ended");
      }
    } else if (req.stream === "session") {
      this.ctx.acceptWebSocket(server, [SESSION_TAG]);
      if (req.after === null) {
        server.serializeAttachment({ kind: "session", cursor: this.log.lastSeq(), live: true } satisfies Watcher);
      } else {
        let cursor = req.after;
        const oldest = this.log.oldestSeq();
        if (oldest !== null && cursor < oldest - 1) {
          send(server, sseBlock(null, "gap", JSON.stringify({ lastEventId: cursor, oldestId: oldest })));
          cursor = oldest - 1;
        }
        this.sendPage(server, cursor);
      }
    }
    return new Response(null, { status: 101, webSocket: client });
  }

  /** The Worker asks for the next replay page once the reader has room (flow control of a replay). */
  onMessage(ws: WebSocket, message: string | ArrayBuffer): void {
    if (message !== NEXT) return;
    const w = ws.deserializeAttachment() as Watcher;
    if (w.kind === "session" && !w.live) this.sendPage(ws, w.cursor);
  }

  /**
   * One replay page from SQLite. Synchronous from read to attachment, so no event can fall between the
   * page and going live: an event written later has a seq past the cursor and is sent by `flush`.
   */
  private sendPage(ws: WebSocket, cursor: number): void {
    const page = this.log.page(cursor);
    ws.serializeAttachment({ kind: "session", cursor: page.cursor, live: !page.more } satisfies Watcher);
    if (page.text) send(ws, page.text);
    if (page.more) send(ws, MORE);
  }
}

/** What the Worker asked for (src/http/routes-events.ts builds these URLs). */
function watchRequestOf(
  request: Request,
): { stream: "session"; after: number | null } | { stream: "run"; runId: string } {
  const url = new URL(request.url);
  const runId = url.searchParams.get("runId");
  if (url.searchParams.get("stream") === "run" && runId) return { stream: "run", runId };
  const after = url.searchParams.get("after");
  return { stream: "session", after: after === null ? null : Number(after) };
}

function statusBlock(s: RunSnapshot): string {
  const data = {
    status: s.status,
    ...(s.reply !== undefined ? { reply: s.reply } : {}),
    ...(s.error !== undefined ? { error: s.error } : {}),
  };
  return sseBlock(null, "status", JSON.stringify(data));
}

/** A socket whose Worker side is gone throws on send; its close event cleans it up. */
function send(ws: WebSocket, text: string): void {
  try {
    ws.send(text);
  } catch {
    /* closed */
  }
}

function errorResponse(status: number, type: string, message: string): Response {
  return Response.json({ ok: false, error: { type, message } }, { status });
}

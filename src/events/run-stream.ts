import type { RunSnapshot } from "../session/types";
import { eventId, newRunIncarnation, resumeAfter } from "./event-ids";
import { sseBlock } from "./event-log";
import { EVENT_LIMITS } from "./limits";
import { send } from "./socket-send";

/**
 * A run's part of a socket tag: the run id's UUID, unique within its session (src/session/run-id.ts). Not the
 * whole id, which carries the session key and can exceed the 256 characters a tag may have.
 */
function tagRef(runId: string): string {
  const dot = runId.indexOf(".");
  return (dot === -1 ? runId : runId.slice(0, dot)).slice(0, 64);
}
export const runTag = (runId: string) => `run:${tagRef(runId)}`;
/** The sockets whose stream was opened with this run's token: they end when the run does (docs/events.md). */
export const authTag = (runId: string) => `auth:${tagRef(runId)}`;

/** Events of a run that has ended, replayed to a late watcher; their own fixed incarnation. */
const ENDED = "ended";

/**
 * What this instance keeps of a running run, in memory only (never stored): its stream's recent events for
 * a watcher that resumes, bounded in events and characters (EVENT_LIMITS.runReplay*), and the text of
 * the current model step for a watcher that joins, or resumes from further back than what is kept.
 */
interface RunRecord {
  incarnation: string;
  /** Id number of the newest event. */
  last: number;
  kept: { n: number; block: string }[];
  keptChars: number;
  stepText: string;
}

/**
 * `GET /v1/runs/{runId}/events` (docs/events.md): the run's text as it is generated, its tool calls and
 * its final status, each with an id; `Last-Event-ID` resumes from memory without repeats.
 */
export class RunStreams {
  private readonly records = new Map<string, RunRecord>();

  constructor(private readonly ctx: DurableObjectState) {}

  delta(runId: string, text: string): void {
    if (!text) return;
    const record = this.record(runId);
    record.stepText += text;
    this.emit(runId, record, "delta", JSON.stringify({ text }));
  }

  toolCall(runId: string, call: { toolCallId: string; toolName: string; args: unknown }): void {
    this.emit(runId, this.record(runId), "tool-call", JSON.stringify(call));
  }

  /** A model step finished: the next delta starts a new step's text. */
  stepEnded(runId: string): void {
    const record = this.records.get(runId);
    if (record) record.stepText = "";
  }

  /** The run ended (published after its transaction committed): its status, then the stream closes. */
  ended(s: RunSnapshot): void {
    const record = this.records.get(s.runId);
    const block = record
      ? this.keep(record, "status", statusData(s))
      : sseBlock(eventId(ENDED, 2), "status", statusData(s));
    this.records.delete(s.runId);
    for (const ws of this.ctx.getWebSockets(runTag(s.runId))) {
      send(ws, block);
      ws.close(1000, "run ended");
    }
  }

  /** The session's storage is going away (delete, archive): nothing of its runs is kept. */
  clear(): void {
    this.records.clear();
  }

  /**
   * A new watcher of `run` (already accepted with the run's tag). `resume`: its `Last-Event-ID`. A run
   * that has ended replays its reply and status and closes. A running run: the events after the resume
   * point when they are kept, else a `reset` (drop what you have) and the current step's text so far.
   */
  start(ws: WebSocket, run: RunSnapshot, resume: string | null): void {
    if (run.status !== "queued" && run.status !== "running") {
      const at = resume === null ? { after: 0 } : resumeAfter(resume, ENDED);
      if (at === "foreign") send(ws, resetBlock(resume));
      const after = at === "foreign" ? 0 : at.after;
      let text = "";
      if (run.reply && after < 1) text += sseBlock(eventId(ENDED, 1), "delta", JSON.stringify({ text: run.reply }));
      if (after < 2) text += sseBlock(eventId(ENDED, 2), "status", statusData(run));
      if (text) send(ws, text);
      ws.close(1000, "run ended");
      return;
    }
    const record = this.records.get(run.runId);
    if (resume !== null) {
      const at = record ? resumeAfter(resume, record.incarnation) : "foreign";
      const oldest = record?.kept[0]?.n ?? (record ? record.last + 1 : 1);
      if (record && at !== "foreign" && at.after <= record.last && at.after >= oldest - 1) {
        const text = record.kept
          .filter((e) => e.n > at.after)
          .map((e) => e.block)
          .join("");
        if (text) send(ws, text);
        return;
      }
      send(ws, resetBlock(resume));
    }
    // The text so far carries the newest id: a resume from it continues after everything it stands for.
    if (record?.stepText)
      send(ws, sseBlock(eventId(record.incarnation, record.last), "delta", JSON.stringify({ text: record.stepText })));
  }

  private record(runId: string): RunRecord {
    let record = this.records.get(runId);
    if (!record) {
      // Runs execute one at a time; late deltas of an aborted run could still open records, so the map
      // is capped too, dropping the oldest.
      if (this.records.size >= EVENT_LIMITS.runRecords) this.records.delete(this.records.keys().next().value!);
      record = { incarnation: newRunIncarnation(), last: 0, kept: [], keptChars: 0, stepText: "" };
      this.records.set(runId, record);
    }
    return record;
  }

  private emit(runId: string, record: RunRecord, type: string, data: string): void {
    const block = this.keep(record, type, data);
    for (const ws of this.ctx.getWebSockets(runTag(runId))) send(ws, block);
  }

  /** The next event of the record, kept within its bounds (the oldest fall off first). */
  private keep(record: RunRecord, type: string, data: string): string {
    const n = ++record.last;
    const block = sseBlock(eventId(record.incarnation, n), type, data);
    record.kept.push({ n, block });
    record.keptChars += block.length;
    while (
      record.kept.length > EVENT_LIMITS.runReplayEvents ||
      (record.keptChars > EVENT_LIMITS.runReplayChars && record.kept.length > 1)
    )
      record.keptChars -= record.kept.shift()!.block.length;
    return block;
  }
}

function statusData(s: RunSnapshot): string {
  return JSON.stringify({
    status: s.status,
    ...(s.reply !== undefined ? { reply: s.reply } : {}),
    ...(s.error !== undefined ? { error: s.error } : {}),
  });
}

/** Sent when a resume id cannot be continued: the client drops what it has of the stream; what follows starts over. */
export function resetBlock(lastEventId: string | null): string {
  return sseBlock(null, "reset", JSON.stringify({ lastEventId }));
}

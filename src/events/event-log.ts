import { eventId } from "./event-ids";
import { EVENT_LIMITS } from "./limits";
import type { StateChange } from "./state-kinds";
import { advanceHead, notePruned } from "./state-log";

export type SessionEventType = "message" | "run" | "delivery" | "task";

/** One SSE block as the watcher receives it (docs/events.md). */
export function sseBlock(id: string | null, type: string, data: string): string {
  return `${id === null ? "" : `id: ${id}\n`}event: ${type}\ndata: ${data}\n\n`;
}

export interface ReplayPage {
  text: string;
  /** Seq of the last event in the page (the cursor after it). */
  cursor: number;
  /** True when the page ended on its bounds and more events may follow. */
  more: boolean;
}

/**
 * The session's event log in SQLite: one row per event, written by the caller inside the transaction of
 * the change it reports, so a reported change and its event commit together. Seqs come from
 * AUTOINCREMENT and are never reused after pruning; they restart only with the session's storage, which
 * is why event ids carry the session's incarnation (event-ids.ts).
 */
export class EventLog {
  constructor(private readonly sql: SqlStorage) {}

  /** `state`: the material state change this event also is, if any (state-kinds.ts, docs/events.md "changesSince"). */
  append(type: SessionEventType, data: string, state?: StateChange | null): number {
    const seq = this.sql
      .exec<{ seq: number }>(
        "INSERT INTO events (type, data, state) VALUES (?, ?, ?) RETURNING seq",
        type,
        data,
        state ? JSON.stringify(state) : null,
      )
      .one().seq;
    if (state) advanceHead(this.sql, seq);
    // Bounded retention (docs/events.md): usually deletes the one row that fell off the end. The state
    // log's watermark is recorded first, so changesSince reports an exact gap (state-log.ts).
    if (seq > EVENT_LIMITS.retainedEvents) {
      notePruned(this.sql, seq - EVENT_LIMITS.retainedEvents);
      this.sql.exec("DELETE FROM events WHERE seq <= ?", seq - EVENT_LIMITS.retainedEvents);
    }
    return seq;
  }

  /** The newest event's seq (0 before the first): a watcher without a resume point starts after it. */
  lastSeq(): number {
    return this.sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM events").one().s ?? 0;
  }

  oldestSeq(): number | null {
    return this.sql.exec<{ s: number | null }>("SELECT MIN(seq) AS s FROM events").one().s;
  }

  /** Events after `cursor`, oldest first, within the replay page's row and byte bounds (at least one). */
  page(cursor: number, incarnation: string): ReplayPage {
    let text = "";
    let last = cursor;
    let rows = 0;
    for (const r of this.sql.exec<{ seq: number; type: string; data: string }>(
      "SELECT seq, type, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
      cursor,
      EVENT_LIMITS.replayPageEvents,
    )) {
      const block = sseBlock(eventId(incarnation, r.seq), r.type, r.data);
      if (rows > 0 && text.length + block.length > EVENT_LIMITS.replayPageBytes)
        return { text, cursor: last, more: true };
      text += block;
      last = r.seq;
      rows++;
    }
    return { text, cursor: last, more: rows === EVENT_LIMITS.replayPageEvents };
  }
}

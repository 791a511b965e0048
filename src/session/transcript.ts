import type { HistoryPage, TranscriptMessage } from "./types";

type Annotated = HistoryPage["messages"][number];

/**
 * The seq-indexed transcript of one session. Every read is "one page before/after a seq" through an
 * index, so its cost depends on the page size, never on the transcript's length.
 */
export class Transcript {
  constructor(private readonly sql: SqlStorage) {}

  append(msg: TranscriptMessage, runId: string | null): number {
    const isTool = msg.role === "toolResult" ? 1 : 0;
    return this.sql
      .exec<{ seq: number }>(
        "INSERT INTO messages (role, is_tool, run_id, created_at, json) VALUES (?, ?, ?, ?, ?) RETURNING seq",
        msg.role, isTool, runId, msg.timestamp, JSON.stringify(msg),
      )
      .one().seq;
  }

  /** The newest `limit` messages (oldest first), tool results included: the model's context window. */
  recent(limit: number): TranscriptMessage[] {
    const rows = this.sql.exec<{ json: string }>("SELECT json FROM messages ORDER BY seq DESC LIMIT ?", limit).toArray();
    return rows.reverse().map((r) => JSON.parse(r.json) as TranscriptMessage);
  }

  /** A page of up to `limit` messages older than `before` (newest page by default), oldest first. */
  page(opts: { limit: number; before?: number; includeTools: boolean }): HistoryPage {
    const before = opts.before ?? Number.MAX_SAFE_INTEGER;
    // Fetch one extra row to learn whether an older page exists without counting the transcript.
    const rows = opts.includeTools
      ? this.sql.exec<{ seq: number; json: string }>("SELECT seq, json FROM messages WHERE seq < ? ORDER BY seq DESC LIMIT ?", before, opts.limit + 1).toArray()
      : this.sql
          .exec<{ seq: number; json: string }>("SELECT seq, json FROM messages WHERE is_tool = 0 AND seq < ? ORDER BY seq DESC LIMIT ?", before, opts.limit + 1)
          .toArray();
    const hasMore = rows.length > opts.limit;
    const page = rows.slice(0, opts.limit).reverse().map(annotate);
    return { messages: page, hasMore, nextBefore: hasMore && page.length > 0 ? page[0].__switchboard.seq : null };
  }

  /** Up to `limit` messages after `afterSeq`, oldest first (transcript export). */
  after(afterSeq: number, limit: number): { messages: Annotated[]; lastSeq: number | null } {
    const rows = this.sql.exec<{ seq: number; json: string }>("SELECT seq, json FROM messages WHERE seq > ? ORDER BY seq LIMIT ?", afterSeq, limit).toArray();
    return { messages: rows.map(annotate), lastSeq: rows.length ? rows[rows.length - 1].seq : null };
  }

  count(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM messages").one().n;
  }
}

function annotate(r: { seq: number; json: string }): Annotated {
  return { ...(JSON.parse(r.json) as TranscriptMessage), __switchboard: { seq: r.seq } };
}

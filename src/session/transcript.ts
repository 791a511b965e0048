import { capMessage, jsonBytes, STORED_MESSAGE_MAX_BYTES, takeWithinBudget } from "./byte-budget";
import { shownOnlyWithTools } from "./conversation-rows";
import { historyHeadOf, parseHead } from "./history-head";
import type { HistoryPage, RunInput, RunKind, RunStatus, TranscriptMessage } from "./types";

/** A history page, and whether its byte budget (not its `limit`) ended it. */
export type BudgetedPage = HistoryPage & { cutByBytes: boolean };

/** Largest number of rows one export chunk looks at (its byte budget usually ends it first). */
const EXPORT_CHUNK_ROWS = 1000;

/**
 * The seq-indexed transcript of one session. Every read is "one page before/after a seq" through an
 * index, so its cost depends on the page size, never on the transcript's length — and every read has
 * a byte budget applied inside the object (docs/limits.md): the rows' sizes are read from a covering
 * index first, then only the rows that fit are loaded. History pages read the small history heads
 * (history-head.ts), never the full messages.
 */
/**
 * What one history head adds to a page's JSON: its bytes, its annotation `,"__switchboard":{"seq":N}` and a
 * separating comma (the array adds `[]`). One measure for every page reader, so none cuts a page that fits.
 */
const headCost = (r: { seq: number; head_bytes: number }) => r.head_bytes + 26 + String(r.seq).length;

export class Transcript {
  /** `generatedMaxBytes`: the cap for model replies and tool results (`limits.maxMessageBytes`). */
  constructor(
    private readonly sql: SqlStorage,
    private readonly generatedMaxBytes: () => number,
    /**
     * Told of each append inside its transaction (the session's event log, src/events/session-events.ts;
     * the extensions' `onTranscriptAppend`, src/session/extensions.ts).
     */
    private readonly onAppend?: (
      seq: number,
      runId: string | null,
      headJson: string,
      message: TranscriptMessage,
      row: { role: TranscriptMessage["role"]; isTool: boolean },
    ) => void,
  ) {}

  /** `runKind`: the kind of the run whose input `msg` is (a user message), which decides if history shows it. */
  append(msg: TranscriptMessage, runId: string | null, runKind?: RunKind): number {
    // Generated text over the cap is kept truncated with a marker; everything else is only held under the row guard.
    const generated = msg.role === "assistant" || msg.role === "toolResult";
    const stored = capMessage(
      msg,
      generated ? Math.min(this.generatedMaxBytes(), STORED_MESSAGE_MAX_BYTES) : STORED_MESSAGE_MAX_BYTES,
    );
    const json = JSON.stringify(stored);
    const head = historyHeadOf(stored);
    // `is_tool` = shown only with includeTools: tool results, control-token replies, internal prompts (conversation-rows.ts).
    const isTool = shownOnlyWithTools(stored, runKind) ? 1 : 0;
    const seq = this.sql
      .exec<{ seq: number }>(
        "INSERT INTO messages (role, is_tool, run_id, created_at, json, bytes, head_bytes) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        stored.role,
        isTool,
        runId,
        stored.timestamp,
        json,
        jsonBytes(json),
        head.bytes,
      )
      .one().seq;
    this.sql.exec(
      "INSERT INTO message_heads (seq, is_tool, flags, json) VALUES (?, ?, ?, ?)",
      seq,
      isTool,
      head.flags,
      head.json,
    );
    this.onAppend?.(seq, runId, head.json, stored, { role: stored.role, isTool: isTool === 1 });
    return seq;
  }

  /**
   * The model's context: the newest `limit` messages from `sinceSeq` on (the first kept by the latest
   * compaction, src/compaction/) that fit in `maxBytes` (oldest first, tool results included), and always
   * at least the newest one.
   */
  recent(limit: number, maxBytes: number, sinceSeq = 0): TranscriptMessage[] {
    const sizes = this.sql
      .exec<{ seq: number; bytes: number }>(
        "SELECT seq, bytes FROM messages INDEXED BY messages_sizes WHERE seq >= ? ORDER BY seq DESC LIMIT ?",
        sinceSeq,
        limit,
      )
      .toArray();
    if (sizes.length === 0) return [];
    const { count } = takeWithinBudget(
      sizes.map((r) => r.bytes),
      maxBytes,
      1,
    );
    const rows = this.sql
      .exec<{ json: string }>("SELECT json FROM messages WHERE seq >= ? ORDER BY seq", sizes[count - 1].seq)
      .toArray();
    return rows.map((r) => JSON.parse(r.json) as TranscriptMessage);
  }

  /**
   * Sizes and roles of the newest `limit` messages from `sinceSeq` on, newest first, from a covering index
   * (no message is loaded): what a compaction plans with (src/compaction/plan.ts).
   */
  turnSizes(sinceSeq: number, limit: number): { seq: number; role: string; bytes: number }[] {
    return this.sql
      .exec<{ seq: number; role: string; bytes: number }>(
        "SELECT seq, role, bytes FROM messages INDEXED BY messages_turns WHERE seq >= ? ORDER BY seq DESC LIMIT ?",
        sinceSeq,
        limit,
      )
      .toArray();
  }

  /** The messages with `fromSeq <= seq < toSeq`, oldest first (a compaction's input; its caller bounds the range). */
  between(fromSeq: number, toSeq: number): TranscriptMessage[] {
    return this.sql
      .exec<{ json: string }>("SELECT json FROM messages WHERE seq >= ? AND seq < ? ORDER BY seq", fromSeq, toSeq)
      .toArray()
      .map((r) => JSON.parse(r.json) as TranscriptMessage);
  }

  /**
   * A page of up to `limit` history heads older than `before` (newest page by default), oldest first,
   * whose JSON (with the seq annotation) fits in `maxBytes`. The newest message is always included.
   */
  page(opts: {
    limit: number;
    before?: number;
    offset?: number;
    includeTools: boolean;
    maxBytes: number;
  }): BudgetedPage {
    const before = opts.before ?? Number.MAX_SAFE_INTEGER;
    // One extra row tells whether an older page exists without counting the transcript.
    // Each reading names the index that covers it: all messages, or only those that are not tool results.
    // `offset` skips that many of the newest shown messages (OpenClaw's paging): the skip walks the covering
    // index only (a few bytes per entry), and is capped at the tool's input bound (docs/limits.md).
    const [index, visible] = opts.includeTools ? ["messages_sizes", ""] : ["messages_visible", "is_tool = 0 AND "];
    const sizes = this.sql
      .exec<{ seq: number; head_bytes: number }>(
        `SELECT seq, head_bytes FROM messages INDEXED BY ${index} WHERE ${visible}seq < ? ORDER BY seq DESC LIMIT ? OFFSET ?`,
        before,
        opts.limit + 1,
        opts.offset ?? 0,
      )
      .toArray();
    if (sizes.length === 0) return { messages: [], hasMore: false, nextBefore: null, cutByBytes: false };
    const within = Math.min(opts.limit, sizes.length);
    const { count } = takeWithinBudget(sizes.slice(0, within).map(headCost), opts.maxBytes - 2);
    const oldest = sizes[count - 1].seq;
    const newest = sizes[0].seq;
    const messages = this.headsBetween(oldest, newest, opts.includeTools);
    const hasMore = sizes.length > count;
    return { messages, hasMore, nextBefore: hasMore ? oldest : null, cutByBytes: count < within };
  }

  /** The history heads from `oldest` to `newest`, each annotated with its seq (what a page returns). */
  private headsBetween(oldest: number, newest: number, includeTools: boolean): HistoryPage["messages"] {
    const heads = this.sql
      .exec<{ seq: number; flags: number; json: string }>(
        `SELECT seq, flags, json FROM message_heads WHERE seq >= ? AND seq <= ?${includeTools ? "" : " AND is_tool = 0"} ORDER BY seq`,
        oldest,
        newest,
      )
      .toArray();
    return heads.map((h) => ({
      ...parseHead(h.json, h.flags),
      __switchboard: { seq: h.seq },
    })) as unknown as HistoryPage["messages"];
  }

  /**
   * A page of up to `limit` history heads around the message `anchor` (sessions_history `messageId`,
   * docs/search.md): the anchor, then alternately one newer and one older message while they fit in
   * `maxBytes` — read from the covering index, so the cost is the page's, never the transcript's. Empty
   * when the anchor is not a message shown at this `includeTools`. `hasMore`/`nextBefore` page older.
   */
  pageAround(opts: { anchor: number; limit: number; includeTools: boolean; maxBytes: number }): BudgetedPage {
    const empty: BudgetedPage = { messages: [], hasMore: false, nextBefore: null, cutByBytes: false };
    const [index, visible] = opts.includeTools ? ["messages_sizes", ""] : ["messages_visible", "is_tool = 0 AND "];
    const older = this.sql
      .exec<{ seq: number; head_bytes: number }>(
        `SELECT seq, head_bytes FROM messages INDEXED BY ${index} WHERE ${visible}seq <= ? ORDER BY seq DESC LIMIT ?`,
        opts.anchor,
        opts.limit + 1,
      )
      .toArray();
    if (older[0]?.seq !== opts.anchor) return empty;
    const newer = this.sql
      .exec<{ seq: number; head_bytes: number }>(
        `SELECT seq, head_bytes FROM messages INDEXED BY ${index} WHERE ${visible}seq > ? ORDER BY seq LIMIT ?`,
        opts.anchor,
        opts.limit,
      )
      .toArray();
    // The anchor always; then newer and older in turn, each side stopping at the first that does not fit.
    // As page() measures: the heads within `maxBytes - 2`, the array's brackets being the 2.
    let bytes = headCost(older[0]);
    let o = 1;
    let n = 0;
    let cut = false;
    for (let turn = 0; o + n < opts.limit && (n < newer.length || o < older.length); turn++) {
      const side = (turn % 2 === 0 && n < newer.length) || o >= older.length ? "newer" : "older";
      const next = side === "newer" ? newer[n] : older[o];
      if (bytes + headCost(next) > opts.maxBytes - 2) {
        cut = true;
        break;
      }
      bytes += headCost(next);
      if (side === "newer") n++;
      else o++;
    }
    const oldest = older[o - 1].seq;
    const newest = n > 0 ? newer[n - 1].seq : opts.anchor;
    const messages = this.headsBetween(oldest, newest, opts.includeTools);
    const hasMore = older.length > o;
    return { messages, hasMore, nextBefore: hasMore ? oldest : null, cutByBytes: cut };
  }

  /**
   * The next chunk of the JSONL export after `afterSeq`: lines built from the stored JSON as it is (no
   * parse and re-encode), at most `maxBytes` of messages — or one message when a single one is larger.
   */
  exportChunk(afterSeq: number, maxBytes: number): { chunk: string; lastSeq: number | null } {
    const sizes = this.sql
      .exec<{ seq: number; bytes: number }>(
        "SELECT seq, bytes FROM messages INDEXED BY messages_sizes WHERE seq > ? ORDER BY seq LIMIT ?",
        afterSeq,
        EXPORT_CHUNK_ROWS,
      )
      .toArray();
    if (sizes.length === 0) return { chunk: "", lastSeq: null };
    const { count } = takeWithinBudget(
      sizes.map((r) => r.bytes),
      maxBytes,
      96,
    );
    const last = sizes[count - 1].seq;
    let chunk = "";
    for (const r of this.sql.exec<{ seq: number; created_at: number; json: string }>(
      "SELECT seq, created_at, json FROM messages WHERE seq > ? AND seq <= ? ORDER BY seq",
      afterSeq,
      last,
    )) {
      chunk += `{"type":"message","id":"${r.seq}","seq":${r.seq},"timestamp":${JSON.stringify(new Date(r.created_at).toISOString())},"message":${r.json}}\n`;
    }
    return { chunk, lastSeq: last };
  }

  count(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM messages").one().n;
  }
}

/** The user message a run's input becomes when the run starts; `shown` maps its provenance to the keys readers see. */
export function userMessageOf(
  input: RunInput,
  shown: <P extends { sourceSessionKey?: string }>(p: P) => P,
): TranscriptMessage {
  return {
    role: "user",
    content: [{ type: "text", text: input.message }],
    timestamp: Date.now(),
    ...(input.provenance ? { provenance: shown(input.provenance) } : {}),
  };
}

/** The transcript records failed and cut-short runs too, as OpenClaw does (stopReason error/aborted). */
export function runEndedWithoutReply(
  model: string | undefined,
  outcome: { status: RunStatus; error?: string },
  now: number,
): TranscriptMessage {
  return {
    role: "assistant",
    content: [],
    api: "switchboard",
    provider: "switchboard",
    model: model ?? "unknown",
    stopReason: outcome.status === "error" ? "error" : "aborted",
    errorMessage: outcome.error,
    timestamp: now,
  };
}

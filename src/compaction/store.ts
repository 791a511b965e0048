import type { SessionHost } from "../session/host";
import type { TranscriptMessage } from "../session/types";

/**
 * Compactions as stored (docs/compaction.md): a row of the `compactions` table — the summary and the
 * first message kept after it — and a marker message in the transcript, which is what history shows of
 * it (OpenClaw's `{role: "system", content: "Compaction", __openclaw: {kind: "compaction", …}}`, without the
 * summary text). Both are written in one transaction, once the summary exists: a compaction cut short
 * (an eviction, the run's deadline) writes nothing and the next attempt starts over, and one that was
 * written is never written again (`first_kept_seq` is unique; a retried run finds its context fits).
 */

/** Compactions kept per session: the latest is the one in use; older ones only explain older markers. */
const KEPT_COMPACTIONS = 3;

export interface CompactionRow {
  id: number;
  firstKeptSeq: number;
  summary: string;
}

export function latestCompaction(host: Pick<SessionHost, "sql" | "hasStorage">): CompactionRow | null {
  if (!host.hasStorage) return null;
  const r = host.sql
    .exec<{ id: number; first_kept_seq: number; summary: string }>(
      "SELECT id, first_kept_seq, summary FROM compactions ORDER BY id DESC LIMIT 1",
    )
    .toArray()[0];
  return r ? { id: r.id, firstKeptSeq: r.first_kept_seq, summary: r.summary } : null;
}

/** The marker message history shows for a compaction. */
export function compactionMarker(id: number, tokensBefore: number, tokensAfter: number): TranscriptMessage {
  return {
    role: "system",
    content: [{ type: "text", text: "Compaction" }],
    timestamp: Date.now(),
    __openclaw: { kind: "compaction", id: String(id), tokensBefore, tokensAfter },
  };
}

export interface NewCompaction {
  runId: string;
  firstKeptSeq: number;
  summary: string;
  tokensBefore: number;
  tokensAfter: number;
}

/** Record a compaction and its marker in one transaction; false when that cut was recorded already. */
export function writeCompaction(host: SessionHost, c: NewCompaction): boolean {
  return host.storage.transactionSync(() => {
    const exists = host.sql.exec("SELECT 1 FROM compactions WHERE first_kept_seq = ?", c.firstKeptSeq).toArray();
    if (exists.length > 0) return false;
    const id = host.sql.exec<{ id: number }>("SELECT COALESCE(MAX(id), 0) + 1 AS id FROM compactions").one().id;
    const markerSeq = host.transcript.append(compactionMarker(id, c.tokensBefore, c.tokensAfter), c.runId);
    host.sql.exec(
      "INSERT INTO compactions (id, first_kept_seq, summary, tokens_before, tokens_after, marker_seq, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      id,
      c.firstKeptSeq,
      c.summary,
      c.tokensBefore,
      c.tokensAfter,
      markerSeq,
      c.runId,
      Date.now(),
    );
    host.sql.exec("DELETE FROM compactions WHERE id <= ?", id - KEPT_COMPACTIONS);
    return true;
  });
}

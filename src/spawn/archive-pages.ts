import { takeWithinBudget } from "../session/byte-budget";
import type { SessionHost } from "../session/host";

/**
 * History pages of an archived session, so `sessions_history` reads it in bounded steps without the
 * session's storage (archive-read.ts). Version 2 (written now): `<prefix>/history/<n>.json` hold the
 * *history heads* of consecutive transcript rows — each message as `sessions_history` shows it, made once
 * when it was written (src/session/history-head.ts), a few KB however large the message — at most
 * ARCHIVE_PAGE_ROWS and about ARCHIVE_PAGE_BYTES each, as `[seq, shownOnlyWithTools, flags, bytes, head]`;
 * `<prefix>/history/index.json` lists each page's first and last seq and its size. A read fetches the index
 * and then only the pages its answer needs, newest first, within a byte budget: what it reads is about the
 * size of what it answers (80 KB), not of the messages (docs/limits.md).
 *
 * Version 1 (older archives) holds the full messages, ≤ 200 rows / ~1 MiB per page; it is still read.
 */

export const ARCHIVE_PAGE_ROWS = 200;
/** Heads per page file, in bytes: a history answer (80 KB) needs one or two pages. */
export const ARCHIVE_PAGE_BYTES = 64 * 1024;

/** Version 1 row: the full message. */
export type ArchivedRowV1 = [seq: number, hidden: 0 | 1, message: Record<string, unknown>];
/** Version 2 row: the history head, its write-time flags (history-head.ts) and its stored size. */
export type ArchivedHeadRow = [seq: number, hidden: 0 | 1, flags: number, bytes: number, head: Record<string, unknown>];

export type ArchiveIndex =
  /** [firstSeq, lastSeq] of each page, oldest first. */
  | { version: 1; pages: [number, number][] }
  /** [firstSeq, lastSeq, bytes of the page file] of each page, oldest first. */
  | { version: 2; pages: [number, number, number][] };

export const historyPageKey = (prefix: string, n: number) => `${prefix}/history/${n}.json`;
export const historyIndexKey = (prefix: string) => `${prefix}/history/index.json`;

const encoder = new TextEncoder();

/** Written page by page (one page in memory at a time), the index last: an index always points at written pages. */
export async function writeHistoryPages(host: SessionHost, bucket: R2Bucket, prefix: string): Promise<void> {
  const pages: [number, number, number][] = [];
  for (let after = 0; ; ) {
    const sizes = host.sql
      .exec<{ seq: number; head_bytes: number }>(
        "SELECT seq, head_bytes FROM messages INDEXED BY messages_sizes WHERE seq > ? ORDER BY seq LIMIT ?",
        after,
        ARCHIVE_PAGE_ROWS,
      )
      .toArray();
    if (sizes.length === 0) break;
    const { count } = takeWithinBudget(
      sizes.map((r) => r.head_bytes),
      ARCHIVE_PAGE_BYTES,
      24,
    );
    const last = sizes[count - 1].seq;
    const rows = host.sql
      .exec<{ seq: number; is_tool: number; flags: number; json: string }>(
        "SELECT seq, is_tool, flags, json FROM message_heads WHERE seq > ? AND seq <= ? ORDER BY seq",
        after,
        last,
      )
      .toArray();
    const bytesOf = new Map(sizes.map((r) => [r.seq, r.head_bytes]));
    // Built from the stored head JSON as it is: no parse and re-encode.
    const body = `{"rows":[${rows
      .map((r) => `[${r.seq},${r.is_tool ? 1 : 0},${r.flags},${bytesOf.get(r.seq) ?? r.json.length},${r.json}]`)
      .join(",")}]}`;
    await bucket.put(historyPageKey(prefix, pages.length), body, { httpMetadata: { contentType: "application/json" } });
    pages.push([rows[0]?.seq ?? sizes[0].seq, last, encoder.encode(body).byteLength]);
    after = last;
  }
  const index: ArchiveIndex = { version: 2, pages };
  await bucket.put(historyIndexKey(prefix), JSON.stringify(index), {
    httpMetadata: { contentType: "application/json" },
  });
}

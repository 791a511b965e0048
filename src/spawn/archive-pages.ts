import { takeWithinBudget } from "../session/byte-budget";
import type { SessionHost } from "../session/host";

/**
 * History pages of an archived session, so `sessions_history` reads it in bounded steps without the
 * session's storage: `<prefix>/history/<n>.json` hold consecutive transcript rows (at most
 * ARCHIVE_PAGE_ROWS and about ARCHIVE_PAGE_BYTES each) as `[seq, shownOnlyWithTools, message]`, and
 * `<prefix>/history/index.json` lists each page's first and last seq. A read fetches the index and
 * then only the pages it needs, newest first (archive-read.ts).
 */

export const ARCHIVE_PAGE_ROWS = 200;
export const ARCHIVE_PAGE_BYTES = 1024 * 1024;

export type ArchivedRow = [seq: number, hidden: 0 | 1, message: Record<string, unknown>];
export interface ArchiveIndex {
  version: 1;
  /** [firstSeq, lastSeq] of each page, oldest first. */
  pages: [number, number][];
}

export const historyPageKey = (prefix: string, n: number) => `${prefix}/history/${n}.json`;
export const historyIndexKey = (prefix: string) => `${prefix}/history/index.json`;

/** Written page by page (one page in memory at a time), the index last: an index always points at written pages. */
export async function writeHistoryPages(host: SessionHost, bucket: R2Bucket, prefix: string): Promise<void> {
  const pages: [number, number][] = [];
  for (let after = 0; ; ) {
    const sizes = host.sql
      .exec<{ seq: number; bytes: number }>(
        "SELECT seq, bytes FROM messages INDEXED BY messages_sizes WHERE seq > ? ORDER BY seq LIMIT ?",
        after,
        ARCHIVE_PAGE_ROWS,
      )
      .toArray();
    if (sizes.length === 0) break;
    const { count } = takeWithinBudget(
      sizes.map((r) => r.bytes),
      ARCHIVE_PAGE_BYTES,
      8,
    );
    const last = sizes[count - 1].seq;
    const rows = host.sql
      .exec<{ seq: number; is_tool: number; json: string }>(
        "SELECT seq, is_tool, json FROM messages WHERE seq > ? AND seq <= ? ORDER BY seq",
        after,
        last,
      )
      .toArray();
    // Built from the stored JSON as it is: no parse and re-encode of the messages.
    const body = `{"rows":[${rows.map((r) => `[${r.seq},${r.is_tool ? 1 : 0},${r.json}]`).join(",")}]}`;
    await bucket.put(historyPageKey(prefix, pages.length), body, { httpMetadata: { contentType: "application/json" } });
    pages.push([rows[0].seq, last]);
    after = last;
  }
  const index: ArchiveIndex = { version: 1, pages };
  await bucket.put(historyIndexKey(prefix), JSON.stringify(index), {
    httpMetadata: { contentType: "application/json" },
  });
}

import { loadConfig } from "../config/load";
import { parseCanonical } from "../keys";
import type { SessionRow } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import type { HistoryPage } from "../session/types";
import { archivePrefix } from "./archive";
import { type ArchivedRow, type ArchiveIndex, historyIndexKey, historyPageKey } from "./archive-pages";

/**
 * Reads of an archived session (its storage was freed after export, src/spawn/archive.ts): the index
 * row marked `archived: true`, the JSONL transcript streamed from the bucket, and history pages read
 * page file by page file. Every read is bounded: at most ARCHIVE_READ_MAX_PAGES page files per call.
 */

/** A history read fetches at most this many page files; past them it answers with `hasMore` and a cursor. */
export const ARCHIVE_READ_MAX_PAGES = 8;

/** The archived index row of `canonicalKey`, or null when the session is not archived. */
export async function archivedRow(env: Env, canonicalKey: string): Promise<SessionRow | null> {
  const cfg = loadConfig(env);
  const entry = await sessionIndex(env, cfg, parseCanonical(canonicalKey, cfg).agentId).get(canonicalKey);
  return entry?.row.archived ? entry.row : null;
}

function prefixOf(row: SessionRow): string {
  return archivePrefix(row.agentId, row.sessionId);
}

/** The exported JSONL transcript, streamed from the bucket; null when the bucket or the object is missing. */
export async function archivedTranscript(env: Env, row: SessionRow): Promise<ReadableStream | null> {
  const obj = await env.ARCHIVE?.get(`${prefixOf(row)}.jsonl`);
  return obj ? obj.body : null;
}

/**
 * One history page of an archived session, in the shape the session object answers: up to `limit`
 * rows older than `before` (shown-only-with-tools rows only with `includeTools`), oldest first.
 */
export async function archivedHistory(
  env: Env,
  row: SessionRow,
  opts: { limit: number; before?: number; includeTools: boolean },
): Promise<HistoryPage & { cutByBytes: boolean }> {
  const empty = { messages: [], hasMore: false, nextBefore: null, cutByBytes: false };
  const bucket = env.ARCHIVE;
  const indexObj = await bucket?.get(historyIndexKey(prefixOf(row)));
  if (!bucket || !indexObj) return empty;
  const index = (await indexObj.json()) as ArchiveIndex;
  const before = opts.before ?? Number.MAX_SAFE_INTEGER;
  const picked: ArchivedRow[] = [];
  let n = index.pages.length - 1;
  while (n >= 0 && index.pages[n][0] >= before) n--;
  let fetched = 0;
  // Newest page first; one row more than asked tells whether an older page exists.
  for (; n >= 0 && picked.length <= opts.limit && fetched < ARCHIVE_READ_MAX_PAGES; n--, fetched++) {
    const page = await bucket.get(historyPageKey(prefixOf(row), n));
    if (!page) break;
    const rows = ((await page.json()) as { rows: ArchivedRow[] }).rows;
    for (let i = rows.length - 1; i >= 0 && picked.length <= opts.limit; i--) {
      const [seq, hidden] = rows[i];
      if (seq < before && (opts.includeTools || hidden === 0)) picked.push(rows[i]);
    }
  }
  const more = picked.length > opts.limit;
  const kept = picked.slice(0, opts.limit).reverse();
  // Out of page budget before the page filled: more may follow below the oldest page read.
  const unread = !more && n >= 0;
  const oldest = kept[0]?.[0] ?? (n >= 0 ? index.pages[n + 1]?.[0] : undefined);
  const messages = kept.map(([seq, , message]) => ({
    ...message,
    __switchboard: { seq },
  })) as unknown as HistoryPage["messages"];
  const hasMore = (more || unread) && oldest !== undefined;
  return { messages, hasMore, nextBefore: hasMore ? oldest! : null, cutByBytes: false };
}

/** For the operator's GET /healthz: whether archived sub-agents are exported, or kept because no bucket is bound. */
export function archiveStatus(env: Env): { bucket: boolean; note?: string } {
  return env.ARCHIVE
    ? { bucket: true }
    : {
        bucket: false,
        note: "No ARCHIVE R2 bucket is bound: sub-agents due for archival are kept (their storage is the only copy), not exported and freed.",
      };
}

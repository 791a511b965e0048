import { loadConfig } from "../config/load";
import { parseCanonical } from "../keys";
import { HISTORY_BYTE_CAP } from "../policy/history-sanitize";
import type { SessionRow } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import { markHead } from "../session/history-head";
import type { HistoryPage } from "../session/types";
import { archivePrefix } from "./archive";
import {
  type ArchivedHeadRow,
  type ArchivedRowV1,
  type ArchiveIndex,
  historyIndexKey,
  historyPageKey,
} from "./archive-pages";

/**
 * Reads of an archived session (its storage was freed after export, src/spawn/archive.ts): the index
 * row marked `archived: true`, the JSONL transcript streamed from the bucket, and history pages read
 * page file by page file. Every read is bounded: at most ARCHIVE_READ_MAX_PAGES page files and
 * ARCHIVE_READ_MAX_BYTES of them per call.
 */

/** A history read fetches at most this many page files; past them it answers with `hasMore` and a cursor. */
export const ARCHIVE_READ_MAX_PAGES = 8;
/**
 * …and stops fetching page files once it has read this many bytes of them (after the first): the read costs
 * about what the answer holds (HISTORY_BYTE_CAP), never megabytes of full messages (docs/limits.md).
 */
export const ARCHIVE_READ_MAX_BYTES = 256 * 1024;

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

/** One row as both page versions give it: seq, hidden, the message or head to show, and its size when known. */
type PickedRow = { seq: number; message: Record<string, unknown>; bytes: number };

/**
 * One history page of an archived session, in the shape the session object answers (transcript.ts `page`):
 * up to `limit` rows older than `before` (shown-only-with-tools rows only with `includeTools`), oldest
 * first, within HISTORY_BYTE_CAP — read from as few page files as that needs (archive-pages.ts).
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
  // Heads carry their size: the byte budget is applied while picking (version 2). Full messages (version 1)
  // are sanitised and cut by the caller, as before.
  const budget = index.version === 2 ? HISTORY_BYTE_CAP - 2 : Number.POSITIVE_INFINITY;
  const picked: PickedRow[] = [];
  let used = 0;
  let cut = false;
  let fetchedBytes = 0;
  let n = index.pages.length - 1;
  while (n >= 0 && index.pages[n][0] >= before) n--;
  // Newest page first; one row more than asked tells whether an older page exists.
  for (let fetched = 0; n >= 0 && picked.length <= opts.limit && !cut; n--, fetched++) {
    if (fetched >= ARCHIVE_READ_MAX_PAGES || (fetched > 0 && fetchedBytes >= ARCHIVE_READ_MAX_BYTES)) break;
    const page = await bucket.get(historyPageKey(prefixOf(row), n));
    if (!page) break;
    fetchedBytes += page.size;
    for (const r of rowsOf(index.version, await page.json()).reverse()) {
      if (r.seq >= before || (!opts.includeTools && r.hidden)) continue;
      if (picked.length === opts.limit) {
        picked.push(r);
        break;
      }
      // Each item adds its annotation `,"__switchboard":{"seq":N}` and a separating comma.
      const size = r.bytes + 26 + String(r.seq).length;
      if (picked.length > 0 && used + size > budget) {
        cut = true;
        break;
      }
      used += size;
      picked.push(r);
    }
  }
  const more = picked.length > opts.limit || cut;
  const kept = picked.slice(0, opts.limit).reverse();
  // Out of page budget before the page filled: more may follow below the oldest page read.
  const unread = !more && n >= 0;
  const oldest = kept[0]?.seq ?? (n >= 0 ? index.pages[n + 1]?.[0] : undefined);
  const messages = kept.map((r) => ({
    ...r.message,
    __switchboard: { seq: r.seq },
  })) as unknown as HistoryPage["messages"];
  const hasMore = (more || unread) && oldest !== undefined;
  return { messages, hasMore, nextBefore: hasMore ? oldest! : null, cutByBytes: cut && kept.length < opts.limit };
}

/** A page file's rows, oldest first, as PickedRow (with `hidden`): version 2 heads, or version 1 full messages. */
function rowsOf(version: 1 | 2, body: unknown): (PickedRow & { hidden: boolean })[] {
  if (version === 2)
    return (body as { rows: ArchivedHeadRow[] }).rows.map(([seq, hidden, flags, bytes, head]) => ({
      seq,
      hidden: hidden === 1,
      bytes,
      message: markHead(head, flags),
    }));
  return (body as { rows: ArchivedRowV1[] }).rows.map(([seq, hidden, message]) => ({
    seq,
    hidden: hidden === 1,
    bytes: 0,
    message,
  }));
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

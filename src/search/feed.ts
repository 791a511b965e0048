import { parseCanonical } from "../keys";
import { log } from "../log";
import { takeWithinBudget } from "../session/byte-budget";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import { indexedTextOf } from "./query-text";
import type { IngestBatch } from "./search-index-object";
import { searchShardFor } from "./search-shards";

/**
 * The search feed (docs/search.md): every user and assistant message a session writes reaches its
 * agent's search index. The message row itself is the durable record — the feed keeps only the last seq
 * it pushed (`search_feed`) — and the `search-feed` timer is written in the transaction that appends the
 * message, so a message is pushed after any eviction or restart: by the alarm, in batches, with the
 * default attempt limit (docs/timers.md). Removing the session (delete, archive) removes its messages
 * from the index.
 */

export const SEARCH_FEED_TIMER = "search-feed";
const FEED_REF = "messages";
/** Messages per push, and the bytes of their history heads read for one push (docs/limits.md). */
export const FEED_BATCH_MESSAGES = 64;
export const FEED_BATCH_BYTES = 256 * 1024;
/**
 * How long after a message its push is due: the messages of that second (a run's input and its reply, a
 * burst into one session) go in one push and one alarm, not one each. Search lags the transcript by about
 * this much (docs/search.md).
 */
export const FEED_DELAY_MS = 1_000;
/** A head stored as the oversize placeholder (src/session/history-head.ts) has no text of the message. */
const OVERSIZED_HEAD = 4;

/** The push in flight per session object: pushes of one object never overlap, and a removal waits for them. */
const inFlight = new WeakMap<SessionHost, Promise<void>>();

/** Isolated cron run sessions are never listed (docs/contract.md), so they are not searchable either. */
function searchable(host: SessionHost): boolean {
  try {
    return !parseCanonical(host.key, host.cfg).isCronRun;
  } catch {
    return false;
  }
}

function afterSeq(host: SessionHost): number {
  return host.sql.exec<{ s: number }>("SELECT after_seq AS s FROM search_feed WHERE id = 1").toArray()[0]?.s ?? 0;
}

/** Push the next batch; the timer stays due while messages are left, and is cleared once none are. */
export async function flushSearchFeed(host: SessionHost): Promise<void> {
  const prior = inFlight.get(host);
  if (prior) await prior.catch(() => {});
  const push = pushBatch(host);
  inFlight.set(host, push);
  try {
    await push;
  } finally {
    if (inFlight.get(host) === push) inFlight.delete(host);
  }
}

async function pushBatch(host: SessionHost): Promise<void> {
  const meta = host.meta;
  if (!host.hasStorage || !meta) return;
  const after = afterSeq(host);
  // Sizes first from the covering index, then only the heads that fit: a push reads a bounded number of bytes.
  const sizes = host.sql
    .exec<{ seq: number; head_bytes: number }>(
      "SELECT seq, head_bytes FROM messages INDEXED BY messages_visible WHERE is_tool = 0 AND seq > ? ORDER BY seq LIMIT ?",
      after,
      FEED_BATCH_MESSAGES,
    )
    .toArray();
  if (sizes.length > 0) {
    const { count } = takeWithinBudget(
      sizes.map((r) => r.head_bytes),
      FEED_BATCH_BYTES,
    );
    const last = sizes[count - 1].seq;
    const docs: IngestBatch["docs"] = [];
    for (const r of host.sql.exec<{ seq: number; flags: number; json: string; created_at: number }>(
      `SELECT h.seq, h.flags, h.json, m.created_at FROM message_heads h JOIN messages m ON m.seq = h.seq
       WHERE h.seq > ? AND h.seq <= ? AND h.is_tool = 0 ORDER BY h.seq`,
      after,
      last,
    )) {
      if (r.flags & OVERSIZED_HEAD) continue;
      const head = JSON.parse(r.json) as { role?: string; content?: unknown };
      if (head.role !== "user" && head.role !== "assistant") continue;
      const text = indexedTextOf(head);
      if (text) docs.push({ seq: r.seq, role: head.role, ts: r.created_at, text });
    }
    if (docs.length > 0 && searchable(host)) {
      await searchShardFor(host.bindings, meta.agentId, meta.key).ingest({
        key: meta.key,
        sessionId: meta.sessionId,
        spawnedBy: meta.spawnedBy ?? null,
        docs,
      });
    }
    // Deleted while the push was in flight: its storage (and this timer) are gone with it.
    if (!host.hasStorage) return;
    host.storage.transactionSync(() => {
      host.sql.exec(
        "INSERT INTO search_feed (id, after_seq) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET after_seq = MAX(after_seq, excluded.after_seq)",
        last,
      );
    });
  }
  host.storage.transactionSync(() => {
    const left = host.sql
      .exec("SELECT 1 FROM messages INDEXED BY messages_visible WHERE is_tool = 0 AND seq > ? LIMIT 1", afterSeq(host))
      .toArray().length;
    if (left) host.timers.set(SEARCH_FEED_TIMER, FEED_REF, Date.now());
    else host.timers.clear(SEARCH_FEED_TIMER, FEED_REF);
  });
  await host.timers.arm();
}

const searchFeedRpc = {
  /** Push now what is waiting (tests; a caller that wants a session searchable at once). */
  flush: (host: SessionHost) => flushSearchFeed(host),
};

export const searchFeedExtension: SessionExtension = {
  name: "search-feed",
  onTranscriptAppend(host, m) {
    // Cron-run sessions are never indexed (docs/search.md): no timer, no alarm, no push for their messages.
    if (m.isTool || (m.role !== "user" && m.role !== "assistant") || !searchable(host)) return;
    // Kept if already set earlier: every message until it fires goes in the same push.
    host.timers.set(SEARCH_FEED_TIMER, FEED_REF, Date.now() + FEED_DELAY_MS, undefined, { keepEarlier: true });
    // The append's callers do not all arm the alarm after their transaction; this runs after it committed.
    queueMicrotask(() => {
      // Deleted meanwhile: its storage (and this timer) are gone; an alarm now would only wake an empty object.
      if (host.hasStorage) void host.timers.arm().catch((error) => log.warn("search_feed_arm_failed", { error }));
    });
  },
  timers: {
    // A dead feed timer ends nothing: the messages stay in the transcript, and the next message (or an
    // operator retry, GET /v1/sessions/{key}/timers/dead) pushes them from where the feed stopped.
    [SEARCH_FEED_TIMER]: { revive: () => true },
  },
  onTimer: (host) => flushSearchFeed(host),
  async beforeDelete(host) {
    const meta = host.meta;
    if (!meta) return;
    await inFlight.get(host)?.catch(() => {});
    try {
      await searchShardFor(host.bindings, meta.agentId, meta.key).remove(meta.key, meta.sessionId);
    } catch (error) {
      // A deletion is not refused for the index's sake; the hits it leaves are documented (docs/search.md).
      log.warn("search_remove_failed", { sessionKey: meta.key, error });
    }
  },
  rpc: searchFeedRpc,
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "search-feed": typeof searchFeedRpc;
  }
}

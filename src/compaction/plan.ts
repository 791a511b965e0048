/**
 * When a session compacts, and where it cuts (docs/compaction.md). A run's model context is the latest
 * summary plus the messages from the compaction's first kept message on; when that no longer fits the
 * context budget, the older turns are summarised and the newest kept verbatim. Planned from message sizes
 * and roles alone (a covering index: src/session/transcript.ts `turnSizes`), so deciding costs no message reads.
 */

/** Messages a run's context and a compaction plan look at, newest first: the read is bounded in rows too. */
export const CONTEXT_ROWS = 300;
/**
 * Messages since the last compaction that trigger one however small they are, so the row bound never drops
 * context. With at most half of it kept, a run reads 100–200 messages of a long chat (the summary holds the rest).
 */
export const ROW_TRIGGER = 200;
/** OpenClaw's context window when a model declares none (tokens). */
export const DEFAULT_CONTEXT_TOKENS = 200_000;
/** Tokens left free for the reply and tools: OpenClaw's 20,000, at most a quarter of the window. */
export const RESERVE_TOKENS = 20_000;
/** Token estimate of stored text: about four bytes per token. */
export const BYTES_PER_TOKEN = 4;
/** A stored summary's size at most (longer ones are cut with a marker): room it keeps in every context. */
export const SUMMARY_MAX_BYTES = 32 * 1024;

export interface CompactionSettings {
  enabled: boolean;
  keepRecentTokens: number;
  recentTurnsPreserve: number;
  /** Compact once the active context reaches this many bytes (0: off). */
  maxActiveBytes: number;
}

export interface PlanInput {
  /** Sizes and roles of the messages since the last compaction's first kept one, newest first (≤ CONTEXT_ROWS). */
  rows: { seq: number; role: string; bytes: number }[];
  /** Bytes of the current summary (0 when none). */
  summaryBytes: number;
  /** What a run's context may hold, in bytes. */
  budgetBytes: number;
  settings: CompactionSettings;
}

export interface CompactionPlan {
  /** Oldest message to summarise (the oldest the plan looked at). */
  fromSeq: number;
  /** First message kept verbatim: a user message, so a turn's tool calls and results are never split. */
  cutSeq: number;
  /** Estimated context before (summary + every message looked at) and of the kept messages alone, in bytes. */
  activeBytes: number;
  keptBytes: number;
}

/** The context budget in bytes for a model's window (tokens) under the byte limit of `limits.maxContextBytes`. */
export function contextBudgetBytes(windowTokens: number | undefined, maxContextBytes: number): number {
  const window = windowTokens ?? DEFAULT_CONTEXT_TOKENS;
  const reserve = Math.min(RESERVE_TOKENS, Math.floor(window / 4));
  return Math.min(maxContextBytes, (window - reserve) * BYTES_PER_TOKEN);
}

/** `maxActiveTranscriptBytes` as OpenClaw writes it: a number, or a size such as "20mb"; unset or invalid = 0. */
export function parseByteSize(v: number | string | undefined): number {
  if (typeof v === "number") return Math.max(0, Math.floor(v));
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(v ?? "");
  if (!m) return 0;
  const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? "b").toLowerCase() as "b"];
  return Math.floor(Number(m[1]) * unit);
}

/**
 * Whether to compact now, and where: null when the context fits (or compaction is off, or nothing older
 * than the turns to keep exists). Kept: at least the newest `recentTurnsPreserve` turns (the current one
 * always), then older turns while they fit in `keepRecentTokens` — and never more than the budget leaves
 * beside a summary.
 */
export function planCompaction(input: PlanInput): CompactionPlan | null {
  const { rows, summaryBytes, budgetBytes, settings } = input;
  if (!settings.enabled || rows.length === 0) return null;
  const activeBytes = summaryBytes + rows.reduce((n, r) => n + r.bytes, 0);
  const over =
    activeBytes > budgetBytes ||
    rows.length >= ROW_TRIGGER ||
    (settings.maxActiveBytes > 0 && activeBytes >= settings.maxActiveBytes);
  if (!over) return null;
  const keepBytes = settings.keepRecentTokens * BYTES_PER_TOKEN;
  // The kept messages leave room for the summary beside them (a quarter of a small budget).
  const room = budgetBytes - Math.min(SUMMARY_MAX_BYTES, Math.floor(budgetBytes / 4));
  const mustKeep = Math.max(1, settings.recentTurnsPreserve);
  let suffix = 0;
  let seen = 0;
  let turns = 0;
  let cut: { seq: number; bytes: number } | null = null;
  for (const row of rows) {
    suffix += row.bytes;
    seen++;
    if (row.role !== "user") continue;
    turns++;
    // Beyond the turns that must stay, keep no more than keepRecentTokens — and half the row trigger, so
    // the kept messages alone never trigger the next compaction.
    const optional = turns > mustKeep;
    if (cut && (suffix > room || (optional && (suffix > keepBytes || seen > ROW_TRIGGER / 2)))) break;
    cut = { seq: row.seq, bytes: suffix };
  }
  const fromSeq = rows[rows.length - 1].seq;
  if (!cut || fromSeq >= cut.seq) return null;
  return { fromSeq, cutSeq: cut.seq, activeBytes, keptBytes: cut.bytes };
}

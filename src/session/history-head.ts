import {
  HEAD_FLAGS_FIELD,
  HISTORY_BYTE_CAP,
  OVERSIZED_PLACEHOLDER,
  sanitizeOneMessage,
} from "../policy/history-sanitize";
import { jsonBytes } from "./byte-budget";
import type { TranscriptMessage } from "./types";

/**
 * The history head of a transcript message: the message as `sessions_history` shows it (the one
 * sanitiser of src/policy/history-sanitize.ts, run once when the message is written), stored beside
 * the full message. History pages and list previews read heads, so a session of 512 KiB messages
 * reads a few KB per message instead of the whole row; the sanitiser runs again on the page for its
 * page-level rules (byte cap, placeholder, flags) and skips the per-text work a head already had.
 */

/** A head larger than one history page can never be shown: it is stored as the oversize placeholder. */
const HEAD_MAX_BYTES = HISTORY_BYTE_CAP - 1024;

export interface HistoryHead {
  json: string;
  bytes: number;
  /** Bit flags: 1 = content truncated when the head was made, 2 = redacted, 4 = the oversize placeholder. */
  flags: number;
}

export function historyHeadOf(msg: TranscriptMessage): HistoryHead {
  const s = sanitizeOneMessage(msg);
  let flags = (s.contentTruncated ? 1 : 0) | (s.contentRedacted ? 2 : 0);
  let json = JSON.stringify(s.message);
  let bytes = jsonBytes(json);
  if (bytes > HEAD_MAX_BYTES) {
    json = JSON.stringify({
      role: msg.role === "toolResult" ? "toolResult" : "assistant",
      content: OVERSIZED_PLACEHOLDER,
      timestamp: msg.timestamp,
    });
    bytes = jsonBytes(json);
    flags = 4;
  }
  return { json, bytes, flags };
}

/**
 * A stored head as the sanitiser reads it back: marked as a head (its texts are not redacted and cut a
 * second time) with its write-time flags, in HEAD_FLAGS_FIELD.
 */
export function parseHead(json: string, flags: number): Record<string, unknown> {
  return markHead(JSON.parse(json) as Record<string, unknown>, flags);
}

/** A head already parsed (an archived page's row, src/spawn/archive-pages.ts), marked the same way. */
export function markHead(m: Record<string, unknown>, flags: number): Record<string, unknown> {
  m[HEAD_FLAGS_FIELD] = {
    head: true,
    ...(flags & 1 ? { truncated: true } : {}),
    ...(flags & 2 ? { redacted: true } : {}),
    ...(flags & 4 ? { oversized: true } : {}),
  };
  return m;
}

import { SwitchboardError } from "../errors";
import { utf8ByteLength } from "../policy/history-sanitize";
import type { ContentBlock, TranscriptMessage } from "./types";

/**
 * Byte sizes and budgets (docs/limits.md). Every size here is UTF-8 bytes of the text *as stored*:
 * JSON-escaped, so a control character counts as its escape (`\u0001` = 6 bytes). Measured that way
 * the caps bound the SQLite rows and the RPC payloads that carry the text, whatever characters it holds.
 */

/** Largest inbound `message` / spawn `task`, and largest generated text kept (`limits.maxMessageBytes` may lower it). */
export const MESSAGE_MAX_BYTES = 512 * 1024;
/** Default byte budget of a run's model context (`limits.maxContextBytes`). */
export const CONTEXT_DEFAULT_BYTES = 1024 * 1024;
/** One chunk of `transcript.jsonl` and of the archive export (at least one message, however large). */
export const TRANSCRIPT_CHUNK_BYTES = 1024 * 1024;
/** A delivery listing (`GET /v1/sessions/{key}/deliveries`) stops adding rows at this size. */
export const DELIVERY_LIST_BYTES = 2 * 1024 * 1024;
/** The whole `sessions_list` result, rows and message previews together. */
export const LIST_RESULT_MAX_BYTES = 4 * 1024 * 1024;
/** One row's message preview in `sessions_list` (sanitised like a history page, which may be 80 KB). */
export const PREVIEW_ROW_MAX_BYTES = 16 * 1024;
/**
 * Physical guard for one transcript row, below SQLite's 2 MB row limit in Durable Objects: texts that
 * are not capped at their source (a sub-agent announce quoting a 512 KiB task) still fit.
 */
export const STORED_MESSAGE_MAX_BYTES = 1536 * 1024;
/** A run's error text (exception messages can quote whole response bodies). */
export const ERROR_TEXT_MAX_BYTES = 16 * 1024;

/** What a cut text ends with, so a reader knows it is not the whole text. */
export function truncationMarker(limitBytes: number): string {
  return `\n…[truncated: over the ${limitBytes}-byte limit]`;
}

/** Stored size of one UTF-16 unit at `i` of `s` (see the module comment); pairs count 4 at the high half, 0 at the low. */
function unitBytes(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c < 0x20) return c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
  if (c === 0x22 || c === 0x5c) return 2;
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c >= 0xd800 && c <= 0xdbff) return i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 4 : 6;
  if (c >= 0xdc00 && c <= 0xdfff) return i > 0 && (s.charCodeAt(i - 1) & 0xfc00) === 0xd800 ? 0 : 6;
  return 3;
}

/** Stored (JSON-escaped UTF-8) size of a string, without its quotes and without allocating a copy. */
export function storedTextBytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) n += unitBytes(s, i);
  return n;
}

/** Plain UTF-8 size of a JSON document string (what SQLite stores for it): the one UTF-8 counter, shared with history sanitising. */
export const jsonBytes = utf8ByteLength;

/** `text` cut so that it and its marker fit in `maxBytes` (stored size); unchanged when it already fits. */
export function capText(text: string, maxBytes: number): string {
  if (storedTextBytes(text) <= maxBytes) return text;
  const marker = truncationMarker(maxBytes);
  return cutText(text, Math.max(0, maxBytes - storedTextBytes(marker))) + marker;
}

/** The longest start of `text` whose stored size is at most `room` bytes, never ending inside a surrogate pair. */
export function cutText(text: string, room: number): string {
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const c = text.charCodeAt(end);
    const pair = c >= 0xd800 && c <= 0xdbff && end + 1 < text.length && (text.charCodeAt(end + 1) & 0xfc00) === 0xdc00;
    const size = pair ? 4 : unitBytes(text, end);
    if (used + size > room) break;
    used += size;
    end += pair ? 2 : 1;
  }
  return text.slice(0, end);
}

/** The 413 for an inbound text over the cap, naming the field and the limit. */
export function checkTextSize(field: string, text: string, maxBytes: number): void {
  const bytes = storedTextBytes(text);
  if (bytes > maxBytes) {
    throw new SwitchboardError(
      "payload_too_large",
      `${field}: ${bytes} bytes exceeds the limit of ${maxBytes} bytes (limits.maxMessageBytes; see docs/limits.md)`,
    );
  }
}

/**
 * A transcript message whose texts together fit in `maxBytes`: text, thinking and tool-call arguments
 * are kept in order until the budget is spent, the rest cut with a marker. Returns the message itself
 * when it already fits (the common case costs one size count).
 */
export function capMessage(msg: TranscriptMessage, maxBytes: number): TranscriptMessage {
  if (jsonBytes(JSON.stringify(msg)) <= maxBytes) return msg;
  let left = maxBytes;
  const fitText = (s: string): string => {
    const out = capText(s, Math.max(0, left));
    left -= storedTextBytes(out);
    return out;
  };
  const copy = { ...msg } as TranscriptMessage & { content: ContentBlock[] | string; errorMessage?: string };
  if (typeof copy.content === "string") copy.content = fitText(copy.content);
  else {
    copy.content = copy.content.map((b): ContentBlock => {
      if (b.type === "text") return { ...b, text: fitText(b.text) };
      if (b.type === "thinking") return { ...b, thinking: fitText(b.thinking) };
      if (b.type === "toolCall") {
        const args = JSON.stringify(b.arguments ?? null);
        // Arguments that do not fit are kept as their cut JSON text: a reader still sees what was called.
        if (jsonBytes(args) <= left) {
          left -= jsonBytes(args);
          return b;
        }
        return { ...b, arguments: { truncatedArguments: fitText(args) } };
      }
      // Image data and other opaque payloads are never generated by our runners; drop what does not fit.
      if (b.type === "image" && b.data) {
        const size = storedTextBytes(b.data);
        if (size > left) return { type: "image", mimeType: b.mimeType };
        left -= size;
      }
      return b;
    });
  }
  if (typeof copy.errorMessage === "string") copy.errorMessage = capText(copy.errorMessage, ERROR_TEXT_MAX_BYTES);
  return copy;
}

/**
 * How many of `sizes` (in read order) a page takes within `budget`: at least one, so a reader always
 * advances, then every next one that still fits. `perItem` is the page's own overhead per item.
 */
export function takeWithinBudget(sizes: number[], budget: number, perItem = 0): { count: number; bytes: number } {
  let bytes = 0;
  let count = 0;
  for (const s of sizes) {
    const next = bytes + s + perItem;
    if (count > 0 && next > budget) break;
    bytes = next;
    count++;
  }
  return { count, bytes };
}

/** A run outcome as stored: its reply cut to the message cap, its error to ERROR_TEXT_MAX_BYTES (never refused). */
export function capReplyAndError<T extends { reply?: string; error?: string }>(outcome: T, maxBytes: number): T {
  const reply = outcome.reply !== undefined ? capText(outcome.reply, maxBytes) : undefined;
  const error = outcome.error !== undefined ? capText(outcome.error, ERROR_TEXT_MAX_BYTES) : undefined;
  if (reply === outcome.reply && error === outcome.error) return outcome;
  return { ...outcome, ...(reply !== undefined ? { reply } : {}), ...(error !== undefined ? { error } : {}) };
}

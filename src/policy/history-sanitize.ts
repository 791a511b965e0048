import { redactSensitiveText } from "./redact";

/**
 * What `sessions_history` hands to another agent (OpenClaw's tool-level sanitization; test/policy/history-sanitize.test.ts):
 * bulky or opaque fields removed, every text field redacted then capped, and the whole page
 * capped by JSON bytes with the newest messages kept.
 */

export const HISTORY_TEXT_CAP = 4000;
export const HISTORY_BYTE_CAP = 80 * 1024;
export const TRUNCATION_MARKER = "\n…(truncated)…";
export const OVERSIZED_PLACEHOLDER = "[sessions_history omitted: message too large]";

export interface SanitizedHistory {
  messages: unknown[];
  truncated: boolean;
  droppedMessages: boolean;
  contentTruncated: boolean;
  contentRedacted: boolean;
  bytes: number;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const has = (o: Obj, k: string) => Object.hasOwn(o, k);

export function isToolMessage(m: unknown): boolean {
  return isObj(m) && (m.role === "toolResult" || m.role === "tool");
}

/** UTF-8 length without allocating an encoded copy; a lone surrogate counts as U+FFFD (3 bytes), as TextEncoder writes it. */
export function utf8ByteLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Decoded size of a base64 payload (whitespace and a `data:…;base64,` prefix ignored), without decoding it. */
export function estimateBase64Bytes(data: string): number {
  let start = 0;
  if (data.startsWith("data:")) {
    const comma = data.indexOf(",");
    if (comma >= 0) start = comma + 1;
  }
  // '=' padding and whitespace carry no data; every 4 data chars carry 3 bytes, a 2/3-char tail 1/2.
  let chars = 0;
  for (let i = start; i < data.length; i++) {
    const c = data.charCodeAt(i);
    if (c !== 0x3d && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) chars++;
  }
  return Math.floor((chars * 3) / 4);
}

interface Flags {
  contentTruncated: boolean;
  contentRedacted: boolean;
  /** A stored head stood in for a message too large to show (it counts as a dropped message). */
  oversized?: boolean;
}

function sanitizeText(text: string, flags: Flags): string {
  const r = redactSensitiveText(text);
  if (r.redacted) flags.contentRedacted = true;
  let out = r.text;
  // A text this module already cut (a stored history head, transcript.ts) stays as it is: cut again it would lose its marker.
  const alreadyCut = out.endsWith(TRUNCATION_MARKER) && out.length <= HISTORY_TEXT_CAP + TRUNCATION_MARKER.length;
  if (alreadyCut) flags.contentTruncated = true;
  else if (out.length > HISTORY_TEXT_CAP) {
    // Step back one unit rather than leave half a surrogate pair at the cut.
    const last = out.charCodeAt(HISTORY_TEXT_CAP - 1);
    const cut = last >= 0xd800 && last <= 0xdbff ? HISTORY_TEXT_CAP - 1 : HISTORY_TEXT_CAP;
    out = out.slice(0, cut) + TRUNCATION_MARKER;
    flags.contentTruncated = true;
  }
  return out;
}

function deleteField(o: Obj, key: string, flags: Flags): void {
  if (has(o, key)) {
    delete o[key];
    flags.contentTruncated = true;
  }
}

function sanitizeBlock(block: Obj, flags: Flags): void {
  if (typeof block.text === "string") block.text = sanitizeText(block.text, flags);
  if (typeof block.thinking === "string") block.thinking = sanitizeText(block.thinking, flags);
  if (typeof block.partialJson === "string") block.partialJson = sanitizeText(block.partialJson, flags);
  // Provider signatures are large opaque blobs with no value to a reader.
  deleteField(block, "thinkingSignature", flags);
  if (block.type === "image" && has(block, "data")) {
    const bytes = typeof block.data === "string" ? estimateBase64Bytes(block.data) : undefined;
    // Counts as truncation: the reader gets less content than the transcript holds.
    deleteField(block, "data", flags);
    block.omitted = true;
    if (bytes !== undefined) block.bytes = bytes;
  }
}

/**
 * Flags a stored history head carries from its sanitising at write time (transcript.ts): what was
 * removed then is gone from the head, so the page's flags come from here.
 */
export const HEAD_FLAGS_FIELD = "__sanitized";

/** Sanitizes `m` in place; callers pass a private copy. */
function sanitizeMessage(m: Obj, flags: Flags): void {
  const pre = m[HEAD_FLAGS_FIELD];
  if (isObj(pre)) {
    if (pre.truncated === true) flags.contentTruncated = true;
    if (pre.redacted === true) flags.contentRedacted = true;
    if (pre.oversized === true) flags.oversized = true;
    delete m[HEAD_FLAGS_FIELD];
    // A stored head was sanitised by this function when it was written: its texts are redacted and cut
    // already. (A rule for whole messages belongs before this return, or in sanitizeHistoryMessages.)
    if (pre.head === true) return;
  }
  deleteField(m, "details", flags);
  deleteField(m, "usage", flags);
  deleteField(m, "cost", flags);
  if (typeof m.content === "string") m.content = sanitizeText(m.content, flags);
  else if (Array.isArray(m.content)) {
    for (const block of m.content) if (isObj(block)) sanitizeBlock(block, flags);
  }
  if (typeof m.text === "string") m.text = sanitizeText(m.text, flags);
}

/** A JSON round trip is the deep copy: the output is JSON anyway, and it is exactly what gets measured. */
function copyJson(m: unknown): unknown {
  if (typeof m !== "object" || m === null) return m;
  return JSON.parse(JSON.stringify(m));
}

function jsonBytes(v: unknown): number {
  // JSON.stringify(undefined) is undefined, but inside an array it serializes as `null`.
  return utf8ByteLength(JSON.stringify(v) ?? "null");
}

/** One message as history shows it (redacted, texts capped, bulky fields removed), with what that removed. */
export function sanitizeOneMessage(raw: unknown): {
  message: unknown;
  contentTruncated: boolean;
  contentRedacted: boolean;
} {
  const flags: Flags = { contentTruncated: false, contentRedacted: false };
  const m = copyJson(raw);
  if (isObj(m)) {
    // Only heads read back from storage carry this field (history-head.ts); never trust it on a message being written.
    delete m[HEAD_FLAGS_FIELD];
    sanitizeMessage(m, flags);
  }
  return { message: m, ...flags };
}

/** `byteCap`: the page's JSON size limit (history: HISTORY_BYTE_CAP; a list preview gets its share of the list's budget). */
export function sanitizeHistoryMessages(messages: unknown[], byteCap: number = HISTORY_BYTE_CAP): SanitizedHistory {
  const flags: Flags = { contentTruncated: false, contentRedacted: false };
  const sanitized = messages.map((raw) => {
    const m = copyJson(raw);
    if (isObj(m)) sanitizeMessage(m, flags);
    return m;
  });

  // Size each message once; the array's JSON is `[` + items joined by `,` + `]`.
  const sizes = sanitized.map(jsonBytes);
  let total = 2 + sizes.reduce((a, b) => a + b, 0) + Math.max(0, sizes.length - 1);
  let start = 0;
  // Oldest go first, the newest is always kept so the reader sees where the session stands.
  while (total > byteCap && sanitized.length - start > 1) {
    total -= sizes[start] + 1;
    start++;
  }
  let kept = start > 0 ? sanitized.slice(start) : sanitized;

  let hardCapped = false;
  if (total > byteCap) {
    // A single message is still too big: return a placeholder that keeps its position (`seq`).
    const last = kept[kept.length - 1];
    const placeholder: Obj = { role: "assistant", content: OVERSIZED_PLACEHOLDER };
    if (isObj(last) && last.__switchboard !== undefined) placeholder.__switchboard = last.__switchboard;
    kept = [placeholder];
    total = 2 + jsonBytes(placeholder);
    hardCapped = true;
  }

  const droppedMessages = start > 0 || hardCapped || flags.oversized === true;
  return {
    messages: kept,
    truncated: droppedMessages || flags.contentTruncated,
    droppedMessages,
    contentTruncated: flags.contentTruncated,
    contentRedacted: flags.contentRedacted,
    bytes: total,
  };
}

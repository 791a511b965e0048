/**
 * Inline attachments for `sessions_spawn` (docs/limits.md; test/spawn/attachments.test.ts).
 *
 * Validation only: the caller decides where the bytes go (the child's object stores them).
 * Every refusal is a *result* (`{ ok: false, status, error }`), never a throw, because the
 * tool reports attachment problems as `{ status: "forbidden" | "error", error }` payloads.
 * Error strings match OpenClaw's byte for byte so clients that grep for them keep working.
 */

export interface AttachmentsConfig {
  enabled: boolean;
  maxFiles: number;
  maxFileBytes: number;
  maxTotalBytes: number;
  retainOnSessionKeep: boolean;
}

export interface AttachmentInput {
  name: string;
  content: string;
  encoding?: "utf8" | "base64";
  mimeType?: string;
}

export interface MaterializedAttachment {
  name: string;
  bytes: number;
  /** lowercase hex */
  sha256: string;
  mimeType?: string;
  data: Uint8Array;
}

export type ValidateAttachmentsResult =
  | { ok: true; files: MaterializedAttachment[]; totalBytes: number }
  | { ok: false; status: "forbidden" | "error"; error: string };

export const ATTACHMENTS_DISABLED_ERROR =
  "attachments are disabled for sessions_spawn (enable tools.sessions_spawn.attachments.enabled)";
export const REDACTED_CONTENT = "__OPENCLAW_REDACTED__";

/**
 * A media type as HTTP carries it (RFC 9110 §8.3.1): `type/subtype` of token characters, optionally with
 * `; name=value` parameters (a value may be quoted: printable ASCII without quotes or backslashes). Anything else —
 * CR/LF above all — is refused at the input (src/tools/sessions-spawn-schema.ts), because the type becomes
 * the Content-Type of the file's GET and of its archived copy.
 */
export const MEDIA_TYPE =
  /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+(?:[ \t]*;[ \t]*[\w!#$%&'*+.^`|~-]+=(?:[\w!#$%&'*+.^`|~-]+|"[ !#-[\]-~]*"))*$/;
/** What a file is served as when its stored type is not a media type (stored before types were checked). */
export const FALLBACK_MEDIA_TYPE = "application/octet-stream";

/** The stored type when it is a media type, else the fallback: never a header value that could break a response. */
export function servedMediaType(stored: string | null | undefined): string {
  return stored && stored.length <= 255 && MEDIA_TYPE.test(stored) ? stored : FALLBACK_MEDIA_TYPE;
}

/** Names that would collide with our own bookkeeping or mean "this/parent directory". */
const RESERVED_NAMES = new Set([".", "..", ".manifest.json"]);
// C0 controls (covers NUL, TAB, LF, CR) and DEL. Path separators are checked separately.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const BASE64_BODY = /^[A-Za-z0-9+/]+={0,2}$/;

function fail(error: string): ValidateAttachmentsResult {
  return { ok: false, status: "error", error };
}

/**
 * Returns the reason a (trimmed) name is unusable, or null when it is fine.
 * Names are later used as keys/paths by whoever stores the files, so anything that could
 * traverse, hide a second line in a prompt, or shadow the manifest is refused.
 */
function invalidNameError(name: string): string | null {
  if (name.length === 0) return "attachments_invalid_name (empty)";
  if (name.includes("/") || name.includes("\\") || CONTROL_CHARS.test(name) || RESERVED_NAMES.has(name)) {
    return `attachments_invalid_name (${name})`;
  }
  return null;
}

/**
 * Strict base64 → bytes, or null. Checks run cheapest-first so a hostile multi-megabyte string is
 * refused before any regex or allocation proportional to it:
 *  1. raw length guard (2× the longest acceptable encoding leaves room for line-wrapping whitespace);
 *  2. whitespace stripped; nothing left → null;
 *  3. length multiple of 4;
 *  4. encoded length ≤ ceil(max/3)×4 (the longest encoding of `max` bytes);
 *  5. alphabet [A-Za-z0-9+/] with at most two trailing '=';
 *  6. decoded length ≤ max (step 4 admits up to 2 bytes over when max is not a multiple of 3).
 */
function decodeStrictBase64(raw: string, maxDecodedBytes: number): Uint8Array | null {
  const maxEncodedChars = Math.ceil(maxDecodedBytes / 3) * 4;
  if (raw.length > maxEncodedChars * 2) return null;
  const s = raw.replace(/\s+/g, "");
  if (s.length === 0 || s.length % 4 !== 0) return null;
  // Before the regex so an over-long string is not scanned (step 6 would refuse it anyway).
  if (s.length > maxEncodedChars) return null;
  if (!BASE64_BODY.test(s)) return null;
  const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  const decodedLength = (s.length / 4) * 3 - padding;
  if (decodedLength > maxDecodedBytes) return null;
  let bin: string;
  try {
    bin = atob(s);
  } catch {
    return null;
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

async function sha256Hex(data: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  let hex = "";
  for (const b of digest) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/**
 * Validates and decodes spawn attachments. Order (as in OpenClaw, so the same input yields
 * the same message): disabled → file count → then per file, in input order: name (empty / invalid
 * / duplicate) → content (base64 strictness or utf8 size) → file size → running total.
 * An empty list is fine even when the feature is disabled: there is nothing to refuse.
 */
export async function validateAttachments(
  inputs: AttachmentInput[],
  config: AttachmentsConfig,
): Promise<ValidateAttachmentsResult> {
  const list = Array.isArray(inputs) ? inputs : [];
  if (list.length === 0) return { ok: true, files: [], totalBytes: 0 };
  if (!config.enabled) return { ok: false, status: "forbidden", error: ATTACHMENTS_DISABLED_ERROR };
  if (list.length > config.maxFiles) return fail(`attachments_file_count_exceeded (maxFiles=${config.maxFiles})`);

  const { maxFileBytes, maxTotalBytes } = config;
  const seen = new Set<string>();
  const files: MaterializedAttachment[] = [];
  let totalBytes = 0;

  for (const item of list) {
    // Trimmed like OpenClaw: surrounding whitespace is almost always a client artefact.
    const name = typeof item?.name === "string" ? item.name.trim() : "";
    const nameError = invalidNameError(name);
    if (nameError) return fail(nameError);
    if (seen.has(name)) return fail(`attachments_duplicate_name (${name})`);
    seen.add(name);

    const content: unknown = item.content;
    const encoding = item.encoding ?? "utf8";
    if (typeof content !== "string" || (encoding !== "utf8" && encoding !== "base64")) {
      // Schema validation upstream should make this unreachable; stay total anyway.
      return fail("attachments_materialization_failed");
    }

    let data: Uint8Array;
    if (encoding === "base64") {
      const decoded = decodeStrictBase64(content, maxFileBytes);
      if (decoded === null) return fail("attachments_invalid_base64_or_too_large");
      data = decoded;
    } else {
      // The request body is already size-capped upstream, so encoding before measuring is cheap.
      data = new TextEncoder().encode(content);
    }
    // UTF-8 bytes (not characters) count; base64 was already held to the cap, this keeps it total.
    if (data.byteLength > maxFileBytes) return fail(fileTooBig(name, data.byteLength, maxFileBytes));

    totalBytes += data.byteLength;
    if (totalBytes > maxTotalBytes) {
      return fail(`attachments_total_bytes_exceeded (totalBytes=${totalBytes} maxTotalBytes=${maxTotalBytes})`);
    }

    const file: MaterializedAttachment = { name, bytes: data.byteLength, sha256: await sha256Hex(data), data };
    const mimeType = typeof item.mimeType === "string" ? item.mimeType.trim() : "";
    if (mimeType) file.mimeType = mimeType;
    files.push(file);
  }
  return { ok: true, files, totalBytes };
}

function fileTooBig(name: string, bytes: number, max: number): string {
  return `attachments_file_bytes_exceeded (name=${name} bytes=${bytes} maxFileBytes=${max})`;
}

/** The manifest/receipt shown to the requester and the child: no content, only what identifies it. */
export function attachmentsReceipt(
  files: Pick<MaterializedAttachment, "name" | "bytes" | "sha256">[],
  relDir: string,
): { count: number; totalBytes: number; files: { name: string; bytes: number; sha256: string }[]; relDir: string } {
  let totalBytes = 0;
  const out = files.map((f) => {
    totalBytes += f.bytes;
    return { name: f.name, bytes: f.bytes, sha256: f.sha256 };
  });
  return { count: out.length, totalBytes, files: out, relDir };
}

/**
 * Deep copy of sessions_spawn args with every attachment's content replaced by a marker, so the
 * requester's persisted transcript never holds attachment bytes. Other fields are copied as-is;
 * attachment entries keep only name/encoding/mimeType (anything else could carry content too).
 */
export function redactAttachmentArgs<T>(args: T): T {
  const copy = structuredClone(args);
  if (copy === null || typeof copy !== "object") return copy;
  const rec = copy as Record<string, unknown>;
  if (!Array.isArray(rec.attachments)) return copy;
  rec.attachments = rec.attachments.map((entry: unknown) => {
    const out: Record<string, unknown> = { content: REDACTED_CONTENT };
    if (entry && typeof entry === "object") {
      const e = entry as Record<string, unknown>;
      for (const key of ["name", "encoding", "mimeType"] as const) {
        if (e[key] !== undefined) out[key] = e[key];
      }
    }
    return out;
  });
  return copy;
}

/**
 * Structured logs: one JSON object per line, `{level, event, requestId?, sessionKey?, runId?, …}`,
 * which Workers Logs (`observability` in wrangler.jsonc) indexes field by field.
 *
 * Never a secret (test/log-secrets.test.ts): fields named like credentials are replaced, strings lose
 * bearer tokens, run tokens and every secret value the isolate has seen in its bindings or CONFIG,
 * and errors are reduced to their name and message. Every line is bounded (docs/limits.md).
 */

import { redactUrlsIn } from "./url-credentials";

export type LogLevel = "info" | "warn" | "error";

export interface LogFields {
  requestId?: string;
  sessionKey?: string;
  runId?: string;
  [field: string]: unknown;
}

const REDACTED = "[redacted]";
/** Field names whose values are credentials: `token`, `runToken`, `webhookSecret`, `apiKey`, `Authorization`… (not `inputTokens`). */
const SECRET_FIELD = /(^|[a-z_-])(token|secret|password|api_?key|authorization|cookie|signature)$/i;
/** Credentials recognisable by shape wherever they appear in a string. */
const SECRET_PATTERNS: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[^\s"',]+/gi, `$1 ${REDACTED}`],
  [/\bsbrun\.[A-Za-z0-9._~-]+/g, `sbrun.${REDACTED}`],
  [/\bwhsec_[A-Za-z0-9+/=]+/g, `whsec_${REDACTED}`],
];
/** Secret values shorter than this are not scrubbed by value: they would blank ordinary words. */
const MIN_SECRET_CHARS = 6;
/** Known secret values kept per isolate (bindings and CONFIG change rarely; the set is bounded). */
const MAX_SECRETS = 256;
const MAX_STRING_CHARS = 2_000;
/** Longest secret value kept for scrubbing by value; longer ones are scrubbed up to this (src/http/request-log.ts). */
const MAX_SECRET_CHARS = 8_192;
const MAX_LINE_CHARS = 16_384;
const MAX_DEPTH = 4;
const MAX_KEYS = 50;

const secrets = new Set<string>();
/** The longest remembered secret: a string is scrubbed this far past its cut, so a secret across the cut goes whole. */
let longestSecret = 0;

/** Remember secret values so no log line ever prints them (bindings, CONFIG secrets, resolved API keys). */
export function rememberSecrets(values: Iterable<unknown>): void {
  for (const v of values) {
    if (typeof v !== "string" || v.length < MIN_SECRET_CHARS || secrets.has(v)) continue;
    if (secrets.size >= MAX_SECRETS) secrets.delete(secrets.values().next().value!);
    const secret = v.slice(0, MAX_SECRET_CHARS);
    secrets.add(secret);
    longestSecret = Math.max(longestSecret, secret.length);
  }
}

/**
 * Scrubbed first, cut after: a secret that starts before the cut is removed whole (the window reaches the
 * longest secret past the cut) instead of leaving its first characters in the line.
 */
function scrubString(s: string): string {
  const window = MAX_STRING_CHARS + Math.max(longestSecret, 512);
  let out = s.length > window ? s.slice(0, window) : s;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  for (const [re, replacement] of SECRET_PATTERNS) out = out.replace(re, replacement);
  out = redactUrlsIn(out);
  return s.length > MAX_STRING_CHARS || out.length > MAX_STRING_CHARS ? `${out.slice(0, MAX_STRING_CHARS)}…` : out;
}

function scrub(value: unknown, depth: number): unknown {
  if (typeof value === "string") return scrubString(value);
  if (value === null || typeof value === "number" || typeof value === "boolean" || value === undefined) return value;
  if (typeof value === "bigint") return String(value);
  if (value instanceof Error) {
    // Name and message only: provider errors carry request bodies, headers and URLs.
    const cause = value.cause instanceof Error ? { cause: scrubString(value.cause.message) } : {};
    return { name: value.name, message: scrubString(value.message), ...cause };
  }
  if (depth >= MAX_DEPTH) return "[…]";
  if (Array.isArray(value)) return value.slice(0, MAX_KEYS).map((v) => scrub(v, depth + 1));
  if (typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value).slice(0, MAX_KEYS))
      out[k] = SECRET_FIELD.test(k) ? REDACTED : scrub(v, depth + 1);
    return out;
  }
  return String(value);
}

/** Write one line. Never throws: logging must not change what a request or an alarm does. */
export function logEvent(level: LogLevel, event: string, fields: LogFields = {}): void {
  let line: string;
  try {
    line = JSON.stringify({ level, event, ...(scrub(fields, 0) as object) });
    if (line.length > MAX_LINE_CHARS)
      line = JSON.stringify({
        level,
        event,
        requestId: fields.requestId,
        sessionKey: fields.sessionKey,
        runId: fields.runId,
        truncated: true,
        text: line.slice(0, MAX_LINE_CHARS / 2),
      });
  } catch {
    line = JSON.stringify({ level, event, unserializable: true });
  }
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

export const log = {
  info: (event: string, fields?: LogFields) => logEvent("info", event, fields),
  warn: (event: string, fields?: LogFields) => logEvent("warn", event, fields),
  error: (event: string, fields?: LogFields) => logEvent("error", event, fields),
};

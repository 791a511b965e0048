import { invalid } from "./errors";

/** An agent id: lowercase letters, digits, `_` and `-`, at most 64 characters (CONFIG `agents.entries.<id>`). */
export const AGENT_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/**
 * The one session-key parser (docs/contract.md; test/keys.test.ts), used by every route, tool and object.
 *
 * Canonical keys are lower-case `agent:<agentId>:<rest>`, plus the reserved `global` (the DM bucket
 * under `session.scope = "global"`). Kind is classified on `rest`, so `agent:x:main` is `main` and
 * `agent:x:cron:j` is `cron` — OpenClaw classifies canonical keys as `other`, a bug we do not copy.
 */
export type SessionKind = "main" | "group" | "cron" | "hook" | "node" | "other";
export type ChatType = "direct" | "group" | "channel";

export interface ParsedKey {
  canonicalKey: string;
  agentId: string;
  rest: string;
  kind: SessionKind;
  /** Channel named by the key itself (`<channel>:group:<id>`, `<channel>:direct:<peer>`), if any. */
  channel?: string;
  chatType?: ChatType;
  threadId?: string;
  isSubagent: boolean;
  /** Isolated cron run keys (`cron:<job>:run:<id>`) are never listed (test/keys.test.ts). */
  isCronRun: boolean;
}

export interface KeyContext {
  /** Agent of the caller; `main` resolves to its main session. */
  callerAgentId: string;
  /** The caller's own canonical key, for `current`. */
  callerKey?: string;
  mainKey: string;
  scope: "per-sender" | "global";
  defaultAgentId: string;
}

export const MAX_KEY_LENGTH = 512;
export const SESSION_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Characters a key segment may hold: ids of every channel we know (Telegram `-100…`, Matrix `!room:x.org`, Slack `1710.0001`). */
const SEGMENT_CHARS = "a-z0-9_.@+=!$~,-";
const SEGMENT_RE = new RegExp(`^[${SEGMENT_CHARS}]+$`);
const RESERVED = new Set(["global", "unknown"]);

/** `[Aa][Gg]…`: a JSON Schema pattern has no flags, and keys are case-insensitive. */
const anyCase = (word: string) => [...word].map((c) => `[${c.toUpperCase()}${c}]`).join("");
const SEG = `[A-Z${SEGMENT_CHARS}]+`;
const AGENT_ID = AGENT_ID_RE.source.slice(1, -1).replaceAll("a-z", "A-Za-z");
const AGENT_PREFIX = `${anyCase("agent")}:${AGENT_ID}:`;

/**
 * What `parseSessionKey` accepts, as one ECMA-262 pattern (the `{key}` path parameter's, src/http/route-helpers.ts,
 * so /openapi.json says what the server refuses): segments of SEGMENT_CHARS in either case joined by `:`;
 * `agent:<agentId>:<rest>` when the first segment is `agent`; never `unknown`, nor `unknown`/`global` as the
 * rest of an agent key. Untrimmed keys are refused here (a path has no reason to carry blanks). Not encoded:
 * a bare `global`, which only `session.scope = "global"` accepts (config, not grammar). test/keys.test.ts
 * holds pattern and parser to each other.
 */
export const SESSION_KEY_PATTERN =
  `^(?!${anyCase("unknown")}$)(?!${AGENT_PREFIX}(?:${anyCase("unknown")}|${anyCase("global")})$)` +
  `(?:${AGENT_PREFIX}${SEG}(?::${SEG})*|(?!${anyCase("agent")}(?::|$))${SEG}(?::${SEG})*)$`;

/** `looksLikeSessionKey` of OpenClaw: anything else is a sessionId / custom-key candidate. */
export function looksLikeSessionKey(raw: string): boolean {
  const k = raw.trim().toLowerCase();
  if (k === "main" || k === "current" || k === "global" || k === "unknown") return true;
  if (/^(agent|cron|hook|node|acp|subagent):/.test(k) || k.startsWith("node-")) return true;
  return /:(group|channel|direct|dm):/.test(k) || /^[a-z0-9_-]+:(group|channel|direct):/.test(k);
}

/**
 * Turn a key as given (alias, short form or canonical) into its parsed canonical form.
 * Throws a 400 for malformed or reserved keys; never touches storage.
 */
export function parseSessionKey(raw: string, ctx: KeyContext): ParsedKey {
  if (typeof raw !== "string") throw invalid("sessionKey must be a string");
  const trimmed = raw.trim().toLowerCase();
  if (!trimmed) throw invalid("sessionKey required");
  if (trimmed.length > MAX_KEY_LENGTH) throw invalid(`sessionKey is too long (max ${MAX_KEY_LENGTH} characters)`);

  if (trimmed === "current") {
    if (ctx.callerKey) return parseSessionKey(ctx.callerKey, { ...ctx, callerKey: undefined });
    return parseSessionKey("main", ctx);
  }
  if (trimmed === "main" || trimmed === ctx.mainKey) {
    if (ctx.scope === "global") return globalKey(ctx);
    return classify(`agent:${ctx.callerAgentId}:${ctx.mainKey}`, ctx.callerAgentId, ctx.mainKey, ctx);
  }
  if (trimmed === "global") {
    if (ctx.scope === "global") return globalKey(ctx);
    throw invalid(`"global" is a reserved session key (only used when session.scope = "global")`);
  }
  if (trimmed === "unknown") throw invalid(`"unknown" is a reserved session key and cannot be addressed`);

  const parts = trimmed.split(":");
  if (parts.some((p) => p === "")) throw invalid(`Malformed session key "${clip(raw)}": empty segment`);
  for (const p of parts) {
    if (!SEGMENT_RE.test(p)) throw invalid(`Malformed session key "${clip(raw)}": invalid character in "${clip(p)}"`);
  }

  let agentId: string;
  let restParts: string[];
  if (parts[0] === "agent") {
    if (parts.length < 3) throw invalid(`Malformed session key "${clip(raw)}": expected agent:<agentId>:<rest>`);
    agentId = parts[1];
    if (!AGENT_ID_RE.test(agentId))
      throw invalid(`Malformed session key "${clip(raw)}": invalid agent id "${clip(agentId)}"`);
    restParts = parts.slice(2);
  } else {
    // Un-prefixed keys (cron:, hook:, node-, <channel>:group:<id>, custom) belong to the default agent (test/keys.test.ts).
    agentId = ctx.defaultAgentId;
    restParts = parts;
  }
  const rest = restParts.join(":");
  if (RESERVED.has(rest)) throw invalid(`"${rest}" is a reserved session key and cannot be addressed`);
  // `agent:<id>:main` is that agent's main session whatever the configured mainKey is called.
  const canonicalRest = rest === "main" ? ctx.mainKey : rest;
  return classify(`agent:${agentId}:${canonicalRest}`, agentId, canonicalRest, ctx);
}

function globalKey(ctx: KeyContext): ParsedKey {
  return {
    canonicalKey: "global",
    agentId: ctx.defaultAgentId,
    rest: "global",
    kind: "main",
    isSubagent: false,
    isCronRun: false,
  };
}

function classify(canonicalKey: string, agentId: string, rest: string, ctx: KeyContext): ParsedKey {
  const out: ParsedKey = { canonicalKey, agentId, rest, kind: "other", isSubagent: false, isCronRun: false };
  const parts = rest.split(":");

  // Thread / topic suffix: `…:thread:<tid>` or Telegram `…:topic:<n>`.
  for (let i = parts.length - 2; i >= 1; i--) {
    if (parts[i] === "thread" || parts[i] === "topic") {
      out.threadId = parts.slice(i + 1).join(":");
      break;
    }
  }

  if (rest === ctx.mainKey) out.kind = "main";
  else if (parts[0] === "cron") {
    out.kind = "cron";
    out.isCronRun = parts.length >= 4 && parts[2] === "run";
  } else if (parts[0] === "hook") out.kind = "hook";
  else if (parts[0] === "node" || parts[0].startsWith("node-")) out.kind = "node";
  else if (parts[0] === "subagent") out.isSubagent = true;

  // `<channel>:group|channel|direct:<id>`, `direct:<peer>`, `<channel>:<account>:direct:<peer>`.
  const typeAt = parts.findIndex(
    (p, i) => i < parts.length - 1 && (p === "group" || p === "channel" || p === "direct" || p === "dm"),
  );
  if (out.kind === "other" && !out.isSubagent && typeAt >= 0) {
    const t = parts[typeAt];
    out.chatType = t === "dm" ? "direct" : (t as ChatType);
    if (typeAt > 0) out.channel = parts[0];
    if (out.chatType !== "direct") out.kind = "group";
  }
  return out;
}

/**
 * Key as shown to anyone outside the session objects: under global scope the `global` bucket is shown
 * as `main` (spec), which every surface resolves back to it. Object names, run ids and index columns
 * keep `global`; every key a user, model or runtime reads goes through here (test/policy/global-scope.test.ts).
 */
export function displayKey(canonicalKey: string): string {
  return canonicalKey === "global" ? "main" : canonicalKey;
}

/** Provenance as stored in a transcript and shown to runtimes: its source key in displayed form. */
export function shownProvenance<P extends { sourceSessionKey?: string }>(p: P): P {
  return p.sourceSessionKey === "global" ? { ...p, sourceSessionKey: "main" } : p;
}

/**
 * Channel column of a list row (test/tools/sessions-list.test.ts): groups → the recorded channel (else the
 * key's), direct → lastChannel, cron/hook/node → internal, else unknown.
 */
export function deriveChannel(
  parsed: ParsedKey,
  recorded: { channel?: string | null; lastChannel?: string | null },
): string {
  if (parsed.kind === "cron" || parsed.kind === "hook" || parsed.kind === "node") return "internal";
  if (parsed.kind === "group") return recorded.channel || parsed.channel || recorded.lastChannel || "unknown";
  return recorded.lastChannel || recorded.channel || parsed.channel || "unknown";
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Key context for a caller under a config (mainKey, scope and default agent come from config). */
export function keyContextOf(
  cfg: {
    session: { mainKey: string; scope: "per-sender" | "global" };
    agents: { defaultId: string };
  },
  callerAgentId?: string,
  callerKey?: string,
): KeyContext {
  const defaultAgentId = cfg.agents.defaultId;
  return {
    callerAgentId: callerAgentId ?? defaultAgentId,
    callerKey,
    mainKey: cfg.session.mainKey,
    scope: cfg.session.scope,
    defaultAgentId,
  };
}

/** Parse a key that is already canonical (stored keys, object names). */
export function parseCanonical(key: string, cfg: Parameters<typeof keyContextOf>[0]): ParsedKey {
  return parseSessionKey(key, keyContextOf(cfg));
}

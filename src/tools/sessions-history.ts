import { z } from "zod";
import { invalid } from "../errors";
import { displayKey } from "../keys";
import { HISTORY_BYTE_CAP, sanitizeHistoryMessages } from "../policy/history-sanitize";
import type { BudgetedPage } from "../session/transcript";
import { archivedHistory, archivedRow } from "../spawn/archive-read";
import { isRefusal, type Refusal, refusal, type ToolContext } from "./context";
import { defineTool } from "./definition";
import { callerVisibility, guardTarget, resolveSessionReference } from "./resolve";

export const HISTORY_DEFAULT_LIMIT = 50;
export const HISTORY_MAX_LIMIT = 1000;

/** Largest `offset` (docs/limits.md): the skip walks the transcript's covering index, a few bytes per message. */
export const HISTORY_MAX_OFFSET = 100_000;

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts), never silently ignored.
export const sessionsHistorySchema = z.strictObject({
  sessionKey: z.string().max(1024).describe("Session key, `main`, `current`, or a sessionId from sessions_list."),
  limit: z
    .number()
    .min(1)
    .optional()
    .describe(`Max messages (default ${HISTORY_DEFAULT_LIMIT}, clamped to ${HISTORY_MAX_LIMIT}).`),
  includeTools: z.boolean().optional().describe("Include toolResult messages (default false)."),
  before: z
    .number()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .optional()
    .describe("Only messages older than this seq: pass nextBefore of the previous page to page backwards."),
  offset: z
    .number()
    .min(0)
    .max(HISTORY_MAX_OFFSET)
    .optional()
    .describe(
      `Skip this many of the newest messages (OpenClaw's paging; at most ${HISTORY_MAX_OFFSET}): pass nextOffset of the previous page. Not with \`before\`.`,
    ),
  messageId: z
    .string()
    .max(32)
    .optional()
    .describe(
      "Read around this message (a messageId from sessions_search, or a message's __switchboard.seq): the message, then newer and older ones in turn. A message not in the session gives an empty page. Not with `before` or `offset`.",
    ),
  sessionId: z
    .string()
    .max(64)
    .optional()
    .describe("With messageId: the sessionId the hit came from; refused when the session was since replaced."),
});
export type SessionsHistoryArgs = z.infer<typeof sessionsHistorySchema>;

export interface SessionsHistoryResult {
  sessionKey: string;
  sessionId?: string;
  /** Read from the archive bucket: the session was archived (src/spawn/archive-read.ts). */
  archived?: true;
  messages: unknown[];
  truncated: boolean;
  droppedMessages: boolean;
  contentTruncated: boolean;
  contentRedacted: boolean;
  bytes: number;
  /** More (older) messages exist: call again with `before: nextBefore` (or `offset: nextOffset`). */
  hasMore: boolean;
  nextBefore: number | null;
  /** With `offset`: the offset this page started at, and where the next (older) page starts. */
  offset?: number;
  nextOffset?: number;
}

export async function sessionsHistory(
  ctx: ToolContext,
  args: SessionsHistoryArgs,
): Promise<SessionsHistoryResult | Refusal> {
  if (args.offset !== undefined && args.before !== undefined)
    throw invalid("offset: not with before (page with one of them)");
  if (args.sessionId !== undefined && args.messageId === undefined) throw invalid("sessionId requires messageId");
  if (args.messageId !== undefined && (args.offset !== undefined || args.before !== undefined))
    throw invalid("messageId: not with before or offset (an anchored read is its own page)");
  const vis = callerVisibility(ctx);
  const target = await resolveSessionReference(ctx, args.sessionKey, { restrictToSpawned: vis.restrictToSpawned });
  if (isRefusal(target)) return target;
  // The visibility check runs before anything of the target is read. Its only fact from the target is
  // whether the caller spawned it; when the answer turns on that, the object checks it first (history()).
  const asParent = guardTarget(ctx, "history", target.parsed, ctx.caller.sessionKey, vis, args.sessionKey);
  const asStranger = guardTarget(ctx, "history", target.parsed, null, vis, args.sessionKey);
  if (asParent) return asStranger ?? asParent;
  const read = await readHistory(
    ctx.env,
    target.parsed.canonicalKey,
    { ...args, ...(args.messageId !== undefined ? { around: anchorOf(args.messageId) } : {}) },
    asStranger ? ctx.caller.sessionKey : undefined,
  );
  if (!read) return asStranger!;
  // The hit's generation is gone (deleted and created again under the same key): its messageId means nothing here.
  if (args.sessionId !== undefined && read.sessionId !== args.sessionId)
    return refusal("error", `sessionId ${args.sessionId} is not the current session of ${read.sessionKey}`);
  return read;
}

/** A messageId is a transcript seq; anything else names no message (an empty page, never the tail). */
function anchorOf(messageId: string): number {
  return /^[1-9][0-9]{0,15}$/.test(messageId) ? Number(messageId) : 0;
}

/**
 * Read one sanitized page of a session's history (shared by the tool and `GET /v1/sessions/{key}/history`).
 * The object returns history heads within HISTORY_BYTE_CAP (transcript.ts), so what crosses the RPC is
 * already about the size of the result. null when `onlyIfSpawnedBy` was given and the session is not that caller's child.
 */
export async function readHistory(
  env: Env,
  canonicalKey: string,
  args: { limit?: number; before?: number; offset?: number; around?: number; includeTools?: boolean },
  onlyIfSpawnedBy?: string,
): Promise<SessionsHistoryResult | null> {
  const limit = Math.min(HISTORY_MAX_LIMIT, Math.max(1, Math.floor(args.limit ?? HISTORY_DEFAULT_LIMIT)));
  const offset = args.offset !== undefined ? Math.floor(args.offset) : undefined;
  const opts = {
    limit,
    before: args.before !== undefined ? Math.floor(args.before) : undefined,
    ...(offset !== undefined ? { offset } : {}),
    ...(args.around !== undefined ? { around: args.around } : {}),
    includeTools: args.includeTools === true,
  };
  // A plain type, not the RPC stub's return type: that one is Disposable, which a rebuilt archive page is not.
  let page: BudgetedPage & { sessionId?: string; spawnedBy?: string; denied?: true; archived?: true } =
    await env.SESSIONS.getByName(canonicalKey).history({
      ...opts,
      maxBytes: HISTORY_BYTE_CAP,
      ...(onlyIfSpawnedBy !== undefined ? { onlyIfSpawnedBy } : {}),
    });
  // No live session (or not the caller's child as far as the object knows): an archived one is read from the bucket.
  if (page.denied || !page.sessionId) {
    const row = await archivedRow(env, canonicalKey);
    if (row && (onlyIfSpawnedBy === undefined || row.spawnedBy === onlyIfSpawnedBy)) {
      // An archive is read page file by page file from its newest: `before` pages it, an offset would read them all.
      if (offset) throw invalid("offset: an archived session pages with before (nextBefore), not offset");
      // An archive reads page files from the newest: an anchored read is the page that ends at the message.
      const archiveOpts = opts.around !== undefined ? { ...opts, before: opts.around + 1 } : opts;
      page = {
        ...(await archivedHistory(env, row, archiveOpts)),
        sessionId: row.sessionId,
        ...(row.spawnedBy ? { spawnedBy: row.spawnedBy } : {}),
        archived: true,
      };
    }
  }
  if (page.denied) return null;
  const s = sanitizeHistoryMessages(page.messages);
  const kept = s.messages as { __switchboard?: { seq: number } }[];
  // Messages dropped by the byte cap stay reachable: the cursor points at the oldest message returned.
  const dropped = kept.length < page.messages.length;
  const oldestSeq = kept[0]?.__switchboard?.seq;
  const hasMore = page.hasMore || (dropped && oldestSeq !== undefined && oldestSeq > 1);
  return {
    sessionKey: displayKey(canonicalKey),
    ...(page.sessionId ? { sessionId: page.sessionId } : {}),
    ...(page.archived ? { archived: true as const } : {}),
    messages: s.messages,
    // A page the object ended at its byte budget held fewer messages than asked: that is a drop too.
    truncated: s.truncated || page.cutByBytes,
    droppedMessages: s.droppedMessages || page.cutByBytes,
    contentTruncated: s.contentTruncated,
    contentRedacted: s.contentRedacted,
    bytes: s.bytes,
    hasMore,
    nextBefore: hasMore ? (dropped ? (oldestSeq ?? page.nextBefore) : page.nextBefore) : null,
    ...(offset !== undefined ? { offset, ...(hasMore ? { nextOffset: offset + kept.length } : {}) } : {}),
  };
}

export const sessionsHistoryTool = defineTool({
  name: "sessions_history",
  description:
    "Fetch sanitized message history for a visible session. Supports limits, optional tool messages and a `before` cursor (nextBefore) or an `offset` (nextOffset) to page back through long transcripts, or `messageId` to read around a sessions_search hit. Secrets are redacted and long texts capped.",
  schema: sessionsHistorySchema,
  handler: sessionsHistory,
  subagents: "orchestrators",
});

import { z } from "zod";
import { displayKey } from "../keys";
import { sanitizeHistoryMessages } from "../policy/history-sanitize";
import { isRefusal, type Refusal, type ToolContext } from "./context";
import { callerVisibility, guardTarget, resolveSessionReference } from "./resolve";

export const HISTORY_DEFAULT_LIMIT = 50;
export const HISTORY_MAX_LIMIT = 1000;

export const sessionsHistorySchema = z.object({
  sessionKey: z.string().describe("Session key, `main`, `current`, or a sessionId from sessions_list."),
  limit: z.number().min(1).optional().describe(`Max messages (default ${HISTORY_DEFAULT_LIMIT}, clamped to ${HISTORY_MAX_LIMIT}).`),
  includeTools: z.boolean().optional().describe("Include toolResult messages (default false)."),
  before: z.number().min(1).optional().describe("Only messages older than this seq: pass nextBefore of the previous page to page backwards."),
});
export type SessionsHistoryArgs = z.infer<typeof sessionsHistorySchema>;

export interface SessionsHistoryResult {
  sessionKey: string;
  sessionId?: string;
  messages: unknown[];
  truncated: boolean;
  droppedMessages: boolean;
  contentTruncated: boolean;
  contentRedacted: boolean;
  bytes: number;
  /** More (older) messages exist: call again with `before: nextBefore`. */
  hasMore: boolean;
  nextBefore: number | null;
}

export async function sessionsHistory(ctx: ToolContext, args: SessionsHistoryArgs): Promise<SessionsHistoryResult | Refusal> {
  const vis = callerVisibility(ctx);
  const target = await resolveSessionReference(ctx, args.sessionKey, { restrictToSpawned: vis.restrictToSpawned });
  if (isRefusal(target)) return target;
  const { result, spawnedBy } = await readHistory(ctx.env, target.parsed.canonicalKey, args);
  // The page and the target's lineage arrive together; nothing is returned unless the guard allows it.
  const denied = guardTarget(ctx, "history", target.parsed, spawnedBy, vis, args.sessionKey);
  return denied ?? result;
}

/** Read one sanitized page of a session's history (shared by the tool and `GET /v1/sessions/{key}/history`). */
export async function readHistory(
  env: Env,
  canonicalKey: string,
  args: { limit?: number; before?: number; includeTools?: boolean },
): Promise<{ result: SessionsHistoryResult; spawnedBy?: string }> {
  const limit = Math.min(HISTORY_MAX_LIMIT, Math.max(1, Math.floor(args.limit ?? HISTORY_DEFAULT_LIMIT)));
  const page = await env.SESSIONS.getByName(canonicalKey).history({
    limit,
    before: args.before !== undefined ? Math.floor(args.before) : undefined,
    includeTools: args.includeTools === true,
  });
  const s = sanitizeHistoryMessages(page.messages);
  const kept = s.messages as { __switchboard?: { seq: number } }[];
  // Messages dropped by the byte cap stay reachable: the cursor points at the oldest message returned.
  const dropped = kept.length < page.messages.length;
  const oldestSeq = kept[0]?.__switchboard?.seq;
  const hasMore = page.hasMore || (dropped && oldestSeq !== undefined && oldestSeq > 1);
  const result: SessionsHistoryResult = {
    sessionKey: displayKey(canonicalKey),
    ...(page.sessionId ? { sessionId: page.sessionId } : {}),
    messages: s.messages,
    truncated: s.truncated,
    droppedMessages: s.droppedMessages,
    contentTruncated: s.contentTruncated,
    contentRedacted: s.contentRedacted,
    bytes: s.bytes,
    hasMore,
    nextBefore: hasMore ? (dropped ? (oldestSeq ?? page.nextBefore) : page.nextBefore) : null,
  };
  return { result, spawnedBy: page.spawnedBy };
}

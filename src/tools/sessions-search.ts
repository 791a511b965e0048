import { z } from "zod";
import { invalid } from "../errors";
import { displayKey } from "../keys";
import { utf8ByteLength } from "../policy/history-sanitize";
import { redactSensitiveText } from "../policy/redact";
import { sessionIndex } from "../registry/session-index";
import { matchExpression, SEARCH_QUERY_MAX_CHARS, type SearchScope } from "../search/query-text";
import { compareHits, type ShardHit, type ShardHits } from "../search/search-index-object";
import { SEARCH_SHARDS, searchShard, searchShardOf } from "../search/search-shards";
import { queryWords } from "../search/snippet";
import { isRefusal, type Refusal, type ToolContext, timed } from "./context";
import { defineTool } from "./definition";
import { callerVisibility, guardTarget, resolveSessionReference, visibleScope } from "./resolve";

export const SEARCH_DEFAULT_LIMIT = 10;
export const SEARCH_MAX_LIMIT = 25;
/** Longest snippet shown, in characters, after redaction (docs/limits.md). */
export const SNIPPET_MAX_CHARS = 300;
/** The whole result's JSON: trailing hits are dropped beyond it (`truncated`). */
export const SEARCH_RESULT_MAX_BYTES = 32 * 1024;

export const SEARCH_CAPPED_WARNING =
  "Search ranked only the newest matches of a very common query; older matches may be missing. Narrow the query, or pass sessionKey to search one session.";

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts).
export const sessionsSearchSchema = z.strictObject({
  query: z
    .string()
    .max(SEARCH_QUERY_MAX_CHARS)
    .describe(
      `Words to find (at most ${SEARCH_QUERY_MAX_CHARS} characters). Every word must appear (case and accents ignored); words are matched literally — no operators, prefixes or phrases.`,
    ),
  sessionKey: z
    .string()
    .max(1024)
    .optional()
    .describe("Search only this visible session: a key, `main`, `current`, or a sessionId from sessions_list."),
  limit: z
    .number()
    .int()
    .min(1)
    .max(SEARCH_MAX_LIMIT)
    .optional()
    .describe(`Most hits to return (1–${SEARCH_MAX_LIMIT}, default ${SEARCH_DEFAULT_LIMIT}).`),
});
export type SessionsSearchArgs = z.infer<typeof sessionsSearchSchema>;

export interface SearchResultRow {
  sessionKey: string;
  /** The message's time (ms since the epoch). */
  timestamp: number;
  role: "user" | "assistant";
  snippet: string;
  /** −bm25: higher is better. */
  score: number;
  sessionId?: string;
  /** The message's seq: reopen with sessions_history {sessionKey, messageId} (docs/search.md). */
  messageId?: string;
}

export interface SessionsSearchResult {
  results: SearchResultRow[];
  /** More matches than `limit`, or older matches not ranked (a very common query), or the byte budget cut the list. */
  truncated?: true;
  warning?: string;
}

/** One shard asked: which agent's, which shard, in which scope. */
interface ShardAsk {
  agentId: string;
  shard: number;
  scope: SearchScope;
  onlyKey?: string;
}

export async function sessionsSearch(
  ctx: ToolContext,
  args: SessionsSearchArgs,
): Promise<SessionsSearchResult | Refusal> {
  const limit = args.limit ?? SEARCH_DEFAULT_LIMIT;
  const asks = await shardsToAsk(ctx, args);
  if (isRefusal(asks)) return asks;
  const match = matchExpression(args.query);
  const words = queryWords(args.query);
  // A query of punctuation alone holds no word the index could match.
  if (match === null || asks.length === 0) return { results: [] };
  const answers: ShardHits[] = await timed(
    ctx,
    "search",
    Promise.all(
      asks.map((a) =>
        searchShard(ctx.env, a.agentId, a.shard).search({
          match,
          words,
          scope: a.scope,
          ...(a.onlyKey !== undefined ? { onlyKey: a.onlyKey } : {}),
          limit,
        }),
      ),
    ),
  );
  const hits: ShardHit[] = answers.flatMap((a) => a.hits).sort(compareHits);
  const capped = answers.some((a) => a.capped);
  let truncated = capped || answers.some((a) => a.more) || hits.length > limit;
  const results = hits.slice(0, limit).map(resultRow);
  const out: SessionsSearchResult = { results };
  // The 32 KiB budget: at most 25 short rows fit it almost always; a list of very long keys is cut from its end.
  while (results.length > 1 && utf8ByteLength(JSON.stringify(out)) > SEARCH_RESULT_MAX_BYTES) {
    results.pop();
    truncated = true;
  }
  if (truncated) out.truncated = true;
  if (capped) out.warning = SEARCH_CAPPED_WARNING;
  return out;
}

/**
 * The shards a search asks and the scope each applies (visibility inside the query, docs/search.md):
 * every shard of each visible agent, or the one shard of the session `sessionKey` names once the caller
 * may read it. Never more than SEARCH_SHARDS per visible agent, whatever the number of sessions.
 */
async function shardsToAsk(ctx: ToolContext, args: SessionsSearchArgs): Promise<ShardAsk[] | Refusal> {
  const vis = callerVisibility(ctx);
  if (args.sessionKey !== undefined) {
    const target = await resolveSessionReference(ctx, args.sessionKey, { restrictToSpawned: vis.restrictToSpawned });
    if (isRefusal(target)) return target;
    const parsed = target.parsed;
    // As history decides (src/tools/sessions-history.ts): allowed outright, or only as the caller's child.
    const asParent = guardTarget(ctx, "search", parsed, ctx.caller.sessionKey, vis, args.sessionKey);
    const asStranger = guardTarget(ctx, "search", parsed, null, vis, args.sessionKey);
    if (asParent) return asStranger ?? asParent;
    if (asStranger) {
      const row = await sessionIndex(ctx.env, ctx.cfg, parsed.agentId).get(parsed.canonicalKey);
      if (row?.spawnedBy !== ctx.caller.sessionKey) return asStranger;
    }
    // Isolated cron runs are never indexed (src/search/feed.ts).
    if (parsed.isCronRun) return [];
    const key = parsed.canonicalKey;
    return [{ agentId: parsed.agentId, shard: searchShardOf(key), scope: { type: "agent" }, onlyKey: key }];
  }
  const { scope, agents } = visibleScope(ctx);
  return agents.flatMap((agentId) => Array.from({ length: SEARCH_SHARDS }, (_, shard) => ({ agentId, shard, scope })));
}

function resultRow(h: ShardHit): SearchResultRow {
  return {
    sessionKey: displayKey(h.key),
    timestamp: h.ts,
    role: h.role,
    snippet: finishSnippet(h.snippet),
    score: h.score,
    sessionId: h.sessionId,
    messageId: String(h.seq),
  };
}

/**
 * A snippet as shown: whitespace runs as one space, credential-like text redacted again (indexed text
 * was redacted when written; a window may start inside a masked value), at most SNIPPET_MAX_CHARS
 * characters with `…` appended when cut.
 */
function finishSnippet(raw: string): string {
  const text = redactSensitiveText(raw.replace(/\s+/gu, " ").trim()).text;
  if (text.length <= SNIPPET_MAX_CHARS) return text;
  let end = SNIPPET_MAX_CHARS - 1;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

export const sessionsSearchTool = defineTool({
  name: "sessions_search",
  description:
    "Full-text search over the user and assistant messages of the sessions you can see. Every word of the query must appear (case and accents ignored; no operators). Returns the best hits with a snippet each; reopen one with sessions_history {sessionKey, messageId}.",
  schema: sessionsSearchSchema,
  handler: sessionsSearch,
  subagents: "orchestrators",
  rejectArgs: (args: Record<string, unknown>) => {
    // OpenClaw's texts for these (docs/contract.md): an empty query, one too long, a limit out of range.
    if (args.query === undefined) throw invalid("query must not be empty");
    if (typeof args.query === "string" && args.query.length > SEARCH_QUERY_MAX_CHARS)
      throw invalid(`query must not exceed ${SEARCH_QUERY_MAX_CHARS} characters`);
    const limit = args.limit;
    if (
      limit !== undefined &&
      (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT)
    )
      throw invalid("limit must be a positive integer");
  },
});

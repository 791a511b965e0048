import { cutText } from "../session/byte-budget";
import { visToken } from "./hash";

/**
 * What a search matches and what it indexes (docs/search.md): the query's whitespace tokens, each one a
 * quoted FTS5 phrase, all ANDed — so `NOT`, `OR`, `*`, `:` or quotes in a query are words, never
 * operators — and the visible text of a user or assistant message, capped.
 */

/** Longest query (docs/limits.md). */
export const SEARCH_QUERY_MAX_CHARS = 4096;
/** Indexed text per message: the first 16 KiB (UTF-8) of its visible text (docs/limits.md). */
export const INDEXED_TEXT_MAX_BYTES = 16 * 1024;

/** A token that holds a letter or digit: one made only of punctuation has no FTS5 token and would match nothing. */
const WORDY = /[\p{L}\p{N}]/u;

/**
 * The FTS5 expression of a query, limited to the `body` column, or null when no token has a word in it.
 * A `"` inside a token is doubled: FTS5's escape inside a quoted string.
 */
export function matchExpression(query: string): string | null {
  const phrases = query
    .split(/\s+/u)
    .filter((t) => t !== "" && WORDY.test(t))
    .map((t) => `"${t.replaceAll('"', '""')}"`);
  return phrases.length === 0 ? null : `body : (${phrases.join(" AND ")})`;
}

/** Who a caller may see inside one agent's shard, as the SQL filters it. */
export type SearchScope =
  /** Every listed session of the agent. */
  | { type: "agent" }
  /** The caller's own session. */
  | { type: "self"; key: string }
  /** The caller's own session and the sessions it spawned (docs/contract.md, visibility `tree` and the sandbox). */
  | { type: "tree"; key: string };

/**
 * The scope as a second FTS5 condition on the `vis` column, so the full-text index itself narrows the
 * candidates to the caller's sessions (a tree-scoped search costs what its own sessions hold, not what the
 * agent holds), plus the restriction to one session when `sessionKey` was given.
 */
export function scopeExpression(scope: SearchScope, onlyKey?: string): string | null {
  const terms: string[] = [];
  if (scope.type === "self") terms.push(`"${visToken("k", scope.key)}"`);
  if (scope.type === "tree") terms.push(`("${visToken("k", scope.key)}" OR "${visToken("p", scope.key)}")`);
  if (onlyKey !== undefined) terms.push(`"${visToken("k", onlyKey)}"`);
  return terms.length === 0 ? null : `vis : (${terms.join(" AND ")})`;
}

/**
 * The text of a message as history shows it (its stored head: redacted, texts capped): a string content,
 * or its text blocks joined by newlines — never tool calls, thinking or images. Capped at
 * INDEXED_TEXT_MAX_BYTES; empty when there is nothing to index.
 */
export function indexedTextOf(head: { content?: unknown }): string {
  const c = head.content;
  let text = "";
  if (typeof c === "string") text = c;
  else if (Array.isArray(c))
    text = c
      .filter((b): b is { type: "text"; text: string } => b?.type === "text" && typeof b.text === "string")
      .map((b) => b.text)
      .join("\n");
  return cutText(text.trim(), INDEXED_TEXT_MAX_BYTES);
}

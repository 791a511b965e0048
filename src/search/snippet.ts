/**
 * A hit's snippet (docs/search.md), made from the stored text of the few rows kept rather than by FTS5's
 * snippet(): that one runs inside a MATCH query, which walks every match of the query in the shard — a
 * cost that grows with the store. Words are found the way the index tokenizes them (unicode61: runs of
 * letters and digits, case and diacritics folded).
 */

/** Window of the snippet, in words (FTS5's snippet() allows at most 64). */
export const SNIPPET_WORDS = 48;
/** Words before the first hit of the window, so a hit is shown with what led to it. */
const LEAD_WORDS = 8;
const WORD = /[\p{L}\p{N}]+/gu;

/** A word as the index compares it: diacritics removed, lower case. */
export function fold(word: string): string {
  return word
    .normalize("NFD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase();
}

/** The folded words of a query (each whitespace piece may hold several: `foo-bar` is "foo", "bar"). */
export function queryWords(query: string): string[] {
  return [...new Set([...query.matchAll(WORD)].map((m) => fold(m[0])))];
}

/**
 * The window of SNIPPET_WORDS words holding the most distinct query words (the earliest on a tie),
 * starting a few words before its first hit, with " … " where it cuts the text.
 */
export function snippetOf(text: string, words: readonly string[]): string {
  const wanted = new Set(words);
  const tokens = [...text.matchAll(WORD)].map((m) => ({
    start: m.index,
    end: m.index + m[0].length,
    word: fold(m[0]),
  }));
  if (tokens.length === 0) return "";
  const hits = tokens.flatMap((t, i) => (wanted.has(t.word) ? [i] : []));
  let best = 0;
  let bestCount = -1;
  for (const h of hits) {
    const from = Math.max(0, h - LEAD_WORDS);
    const seen = new Set<string>();
    for (let i = from; i < Math.min(tokens.length, from + SNIPPET_WORDS); i++)
      if (wanted.has(tokens[i].word)) seen.add(tokens[i].word);
    if (seen.size > bestCount) {
      best = from;
      bestCount = seen.size;
    }
    if (bestCount === wanted.size) break;
  }
  const last = Math.min(tokens.length, best + SNIPPET_WORDS) - 1;
  const start = best === 0 ? 0 : tokens[best].start;
  const end = last === tokens.length - 1 ? text.length : tokens[last].end;
  return `${start > 0 ? "… " : ""}${text.slice(start, end)}${end < text.length ? " …" : ""}`;
}

/** Hashes of session keys for the search index (docs/search.md). */

/** FNV-1a over the key's UTF-16 units: stable across isolates and releases. */
export function fnv1a(value: string, seed = 0x811c9dc5): number {
  let h = seed;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The visibility token of a session key in the index's `vis` column (docs/search.md): `k…` marks a
 * session's own messages, `p…` those of sessions it spawned. Two 32-bit hashes make a collision between
 * two keys of one agent vanishingly rare, and a collision could only widen the candidate set: the query
 * also compares the stored keys exactly (src/search/search-index-object.ts).
 */
export function visToken(kind: "k" | "p", canonicalKey: string): string {
  return `${kind}${fnv1a(canonicalKey).toString(36)}x${fnv1a(canonicalKey, 0x01000193).toString(36)}`;
}

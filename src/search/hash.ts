/** Hashes of session keys for the search index (docs/search.md): the registry's FNV-1a, one implementation. */

import { fnv1a } from "../registry/shard-hash";

/**
 * The visibility token of a session key in the index's `vis` column (docs/search.md): `k…` marks a
 * session's own messages, `p…` those of sessions it spawned. Two 32-bit hashes make a collision between
 * two keys of one agent vanishingly rare, and a collision could only widen the candidate set: the query
 * also compares the stored keys exactly (src/search/search-index-object.ts).
 */
export function visToken(kind: "k" | "p", canonicalKey: string): string {
  return `${kind}${fnv1a(canonicalKey).toString(36)}x${fnv1a(canonicalKey, 0x01000193).toString(36)}`;
}

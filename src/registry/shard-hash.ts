/**
 * Bound of `session.indexShards` and of a self-sizing index (docs/scale.md). A power of two: every doubling
 * of a self-sizing index divides it, so a sessionId drawn to share its key's shard modulo 256 shares it at
 * every count the index can reach (src/registry/session-id.ts).
 */
export const INDEX_SHARDS_MAX = 256;

/**
 * FNV-1a over the string's UTF-16 units (32 bits; `seed` is the offset basis, or a prefix's hash to continue
 * from, src/registry/session-id.ts). Stable across isolates and releases; the search index hashes keys with it
 * too (src/search/hash.ts, src/search/search-shards.ts).
 */
export function fnv1a(value: string, seed = 0x811c9dc5): number {
  let h = seed;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The shard of a session key (or sessionId): FNV-1a modulo the count — a row's place depends on nothing
 * but its key.
 */
export function shardOf(value: string, shards: number): number {
  return fnv1a(value) % shards;
}

/** Name of shard `shard` of an agent's index; `registry:<agentId>` alone is the pre-sharding object. */
export function shardName(agentId: string, shard: number): string {
  return `registry:${agentId}:${shard}`;
}

export function legacyName(agentId: string): string {
  return `registry:${agentId}`;
}

import { fnv1a } from "./shard-hash";

/**
 * A new session's sessionId: a random UUID whose last three hex digits are chosen so that it hashes to the
 * same index shard as the session's key, so the sessionId locator and the row live in one object and a new
 * session is indexed in one round trip (src/registry/session-index.ts `upsert`, docs/scale.md "Where a send's
 * time goes"). `shards` is the fixed count, or 256 for a self-sizing index (src/registry/session-index.ts
 * `sessionIdPlacement`): every power of two it reaches divides 256, so row and locator stay together through
 * its splits and merges. It stays a v4 UUID (the last digits are in its random node field; at most 12 of its
 * 122 random bits are chosen, and the rest stay random). The hash of the first 33 characters is computed once
 * and each of the 4,096 endings costs three steps (drawing whole UUIDs until one matched cost ~0.4 ms a session
 * at 256). Bounded: when no ending matches (a chance of e^-16 at 256) the drawn UUID is kept, and its locator is
 * written in its own shard first, as for any session whose sessionId lives elsewhere.
 */
export function newSessionId(key: string, shards: number): string {
  const shard = fnv1a(key) % shards;
  const drawn = crypto.randomUUID();
  const prefix = drawn.slice(0, 33);
  const state = fnv1a(prefix);
  const start = Number.parseInt(drawn.slice(33), 16);
  for (let i = 0; i < 4096; i++) {
    const ending = ((start + i) & 0xfff).toString(16).padStart(3, "0");
    if (fnv1a(ending, state) % shards === shard) return prefix + ending;
  }
  return drawn;
}

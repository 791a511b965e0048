import { shardOf } from "./shard-hash";

/**
 * A new session's sessionId: a random UUID drawn until it hashes to the same index shard as the session's
 * key, so the sessionId locator and the row live in one object and a new session is indexed in one round
 * trip (src/registry/session-index.ts `upsert`, docs/scale.md "Where a send's time goes"). Picking among
 * random UUIDs keeps it a v4 UUID (it costs log2(shards) of its 122 random bits, at most 8). Bounded: after
 * 16 × shards draws (a chance of e^-16 to need more) the last draw is taken, and its locator is written in its
 * own shard first, as for any session whose sessionId lives elsewhere.
 */
export function newSessionId(key: string, shards: number): string {
  const shard = shardOf(key, shards);
  let id = crypto.randomUUID();
  for (let draws = 1; draws < 16 * shards && shardOf(id, shards) !== shard; draws++) id = crypto.randomUUID();
  return id;
}

import { fnv1a } from "../registry/shard-hash";
import type { SearchIndexObject } from "./search-index-object";

/**
 * Where an agent's search index lives (docs/search.md): a fixed number of SearchIndexObject shards per
 * agent, `search:<agentId>:<shard>`, a session's messages in the shard its canonical key hashes to. A
 * search asks every shard of each visible agent once, so its cost depends on this constant, never on how
 * many sessions the agent has. Fixed, not configured: a session's shard must not move when settings
 * change (the feed would write to one shard and a removal reach another). Its own layout, independent of
 * the session registry's (src/registry/), which may reshard on its own.
 */
export const SEARCH_SHARDS = 4;

export function searchShardOf(canonicalKey: string): number {
  return fnv1a(canonicalKey) % SEARCH_SHARDS;
}

function searchShardName(agentId: string, shard: number): string {
  return `search:${agentId}:${shard}`;
}

export function searchShard(env: Env, agentId: string, shard: number): DurableObjectStub<SearchIndexObject> {
  return env.SEARCH.getByName(searchShardName(agentId, shard));
}

/** The shard holding a session's messages. */
export function searchShardFor(env: Env, agentId: string, canonicalKey: string): DurableObjectStub<SearchIndexObject> {
  return searchShard(env, agentId, searchShardOf(canonicalKey));
}

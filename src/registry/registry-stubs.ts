import { legacyName, shardName, shardOf } from "./shard-hash";

/**
 * The one way to reach an agent's registry objects: a shard of its session index by number or by the
 * hash of a key / sessionId, or its pre-sharding object (test/registry/index-shards.test.ts). Everything that
 * talks to the index (src/registry/session-index.ts, src/registry/legacy-move.ts) goes through here,
 * so the naming scheme of src/registry/shard-hash.ts is applied in one place.
 */

export type RegistryStub = ReturnType<Env["REGISTRY"]["getByName"]>;

/** Shard `shard` of `agentId`'s index. */
export function indexShardStub(env: Pick<Env, "REGISTRY">, agentId: string, shard: number): RegistryStub {
  return env.REGISTRY.getByName(shardName(agentId, shard));
}

/** The shard of `agentId`'s index that holds `value` (a session key's row, or a sessionId's locator). */
export function indexShardStubOf(
  env: Pick<Env, "REGISTRY">,
  agentId: string,
  value: string,
  shards: number,
): RegistryStub {
  return indexShardStub(env, agentId, shardOf(value, shards));
}

/** `agentId`'s pre-sharding registry object (rows written before the index had shards). */
export function legacyIndexStub(env: Pick<Env, "REGISTRY">, agentId: string): RegistryStub {
  return env.REGISTRY.getByName(legacyName(agentId));
}

import { SwitchboardError } from "../errors";
import { indexShardStub } from "./registry-stubs";

/**
 * The shard count an agent's index was written with, recorded in its shard 0 (every layout has one).
 * Rows are placed by `hash mod count` (src/registry/shard-hash.ts), so an index that holds rows under one
 * count cannot be read or written under another: the rows would be looked for in the wrong shards. A
 * changed count is therefore taken only while the index is empty, and refused with a config error
 * otherwise (docs/scale.md, test/registry/index-shards.test.ts).
 */
export const LAYOUT_SCHEMA = "CREATE TABLE index_layout (shards INTEGER NOT NULL);";

/**
 * `agentId:count` pairs this isolate has checked. The count comes from CONFIG, which only changes with a
 * new deployment (new isolates), so one check per isolate and agent is enough.
 */
const checked = new Set<string>();
/** …and the pairs it refused: a refused count is not re-counted over every shard on each call (same reasoning). */
const refused = new Map<string, SwitchboardError>();

/** Resolves once `agentId`'s index is known to be laid out over `shards` shards (claiming it if new). */
export async function checkLayout(env: Pick<Env, "REGISTRY">, agentId: string, shards: number): Promise<void> {
  const id = `${agentId}:${shards}`;
  if (checked.has(id)) return;
  const known = refused.get(id);
  if (known) throw known;
  const first = indexShardStub(env, agentId, 0);
  const recorded = await first.claimLayout(shards);
  if (recorded !== shards) {
    // Another count was recorded. Taking the new one is safe only if no shard of the old layout holds a row.
    const counts = await Promise.all(
      Array.from({ length: recorded }, (_, n) => indexShardStub(env, agentId, n).count()),
    );
    const rows = counts.reduce((a, b) => a + b, 0);
    if (rows > 0 || !(await first.replaceLayout(recorded, shards))) {
      const error = new SwitchboardError(
        "config_error",
        `Agent "${agentId}": its session index holds ${rows} rows over ${recorded} shards, but the config says ${shards} ` +
          `(agents.entries.<id>.indexShards, else session.indexShards). Rows are placed by their key's hash modulo the count, ` +
          `so changing it would strand them: set it back to ${recorded} (docs/scale.md).`,
      );
      refused.set(id, error);
      throw error;
    }
  }
  checked.add(id);
}

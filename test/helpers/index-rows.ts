import { env } from "cloudflare:workers";
import { loadConfig } from "../../src/config/load";
import { parseCanonical } from "../../src/keys";
import { type IndexEntry, indexEntryOf } from "../../src/registry/row";
import type { SessionMeta } from "../../src/session/types";

export interface SyntheticRow {
  key: string;
  updatedAt: number;
  spawnedBy?: string;
  label?: string;
}

/** Index entries for sessions that never ran (listing and shard tests write them straight into the index). */
export function syntheticIndexEntries(rows: SyntheticRow[]): IndexEntry[] {
  const cfg = loadConfig(env);
  return rows.map((r) => {
    const parsed = parseCanonical(r.key, cfg);
    const meta: SessionMeta = {
      key: parsed.canonicalKey,
      agentId: parsed.agentId,
      sessionId: crypto.randomUUID(),
      kind: parsed.kind,
      createdAt: r.updatedAt,
      updatedAt: r.updatedAt,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      systemSent: false,
      abortedLastRun: false,
      ...(r.spawnedBy ? { spawnedBy: r.spawnedBy } : {}),
      ...(r.label ? { label: r.label } : {}),
    };
    return indexEntryOf(meta, parsed);
  });
}

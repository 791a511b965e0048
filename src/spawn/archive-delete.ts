import { loadConfig } from "../config/load";
import { SwitchboardError, toRpcError } from "../errors";
import { parseCanonical } from "../keys";
import type { SessionRow } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import type { SessionHost } from "../session/host";
import { archivePrefix } from "./archive";
import { archivedRow } from "./archive-read";

/**
 * An archived sub-agent's key is read-only (docs/contract.md, "Archived sessions"): its transcript and history
 * are read from the bucket, `DELETE /v1/sessions/{key}` removes it — archive objects, then its index row —
 * and only then may the key hold a live session again. A write to it meanwhile is refused (409) rather than
 * creating a live session that would hide the archive and overwrite its index row.
 */

/** R2 deletes take at most this many keys per call; a list page holds as many. */
const DELETE_BATCH = 1000;

export function archivedConflict(key: string): SwitchboardError {
  return new SwitchboardError(
    "conflict",
    `Session ${key} is archived and read-only (its history is read from the archive); DELETE /v1/sessions/${encodeURIComponent(key)} removes it, after which the key can be used again.`,
  );
}

/**
 * Before a session object creates a session under its key: refuse when the key is an archived sub-agent's.
 * Only sub-agent keys are ever archived, so no other key pays the index read; a child being spawned has a
 * new key and skips it too (its caller passes `spawning`).
 */
export async function refuseIfArchived(host: SessionHost, spawning = false): Promise<void> {
  // The cheap test first: this runs before every enqueue into a session that does not exist yet.
  if (host.meta || spawning || !host.key.includes(":subagent:")) return;
  if (!parseCanonical(host.key, host.cfg).isSubagent) return;
  if (await archivedRow(host.bindings, host.key)) throw toRpcError(archivedConflict(host.key));
}

/**
 * Delete an archived session: every object under its archive prefix (the JSONL transcript, history pages,
 * attachments), in bounded batches, then its index row. In that order, so a delete cut short leaves the row
 * and is finished by deleting again.
 */
export async function deleteArchived(env: Env, canonicalKey: string, row: SessionRow): Promise<void> {
  const bucket = env.ARCHIVE;
  const prefix = archivePrefix(row.agentId, row.sessionId);
  if (bucket) {
    await bucket.delete(`${prefix}.jsonl`);
    for (let cursor: string | undefined; ; ) {
      const page = await bucket.list({ prefix: `${prefix}/`, limit: DELETE_BATCH, ...(cursor ? { cursor } : {}) });
      if (page.objects.length > 0) await bucket.delete(page.objects.map((o) => o.key));
      if (!page.truncated) break;
      cursor = page.cursor;
    }
  }
  const cfg = loadConfig(env);
  await sessionIndex(env, cfg, row.agentId).remove(canonicalKey, row.sessionId);
}

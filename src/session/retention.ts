/**
 * Finished state-machine rows (agent-to-agent flows, sub-agent announces, child slots, dedupe keys of
 * received announces) and delivered outbox rows are kept for a week — long past any retry or
 * idempotency window, so they stay inspectable — and then pruned, so a long-lived session's storage
 * grows with its live work, not with its history of finished work.
 *
 * One `prune` timer per session does it: armed on the session's alarm when finished rows exist and it
 * is not armed yet, due when the oldest of them expires; on firing it deletes in bounded batches
 * (index seeks on kind/state/updated_at and status/delivered_at) and re-arms for the next oldest.
 */

export const RETENTION_MS = 7 * 24 * 60 * 60_000;
export const PRUNE_TIMER = "prune";
export const PRUNE_REF = "finished";
const BATCH = 500;
/** A backlog larger than one batch continues shortly after, in its own alarm (short transactions). */
const BACKLOG_DELAY_MS = 1_000;

/** Finished states per flow kind, as each extension declares them. */
export type FinishedFlowStates = Record<string, readonly string[]>;

/**
 * Delete one batch of rows finished before `now - RETENTION_MS`. Returns when to run next: soon when
 * a batch was full, else when the oldest remaining finished row expires, or null when none is left.
 */
export function pruneFinished(sql: SqlStorage, finished: FinishedFlowStates, now: number): number | null {
  const cutoff = now - RETENTION_MS;
  let fullBatch = false;
  for (const [kind, states] of Object.entries(finished)) {
    for (const state of states) {
      const n = sql
        .exec(
          "DELETE FROM flows WHERE rowid IN (SELECT rowid FROM flows WHERE kind = ? AND state = ? AND updated_at < ? LIMIT ?) RETURNING 1",
          kind,
          state,
          cutoff,
          BATCH,
        )
        .toArray().length;
      fullBatch ||= n === BATCH;
    }
  }
  // Aged from delivery, not creation: a dead letter retried after a week is still kept a week once delivered.
  const n = sql
    .exec(
      "DELETE FROM outbox WHERE rowid IN (SELECT rowid FROM outbox WHERE status = 'delivered' AND delivered_at < ? LIMIT ?) RETURNING 1",
      cutoff,
      BATCH,
    )
    .toArray().length;
  if (fullBatch || n === BATCH) return now + BACKLOG_DELAY_MS;
  const next = nextPruneDue(sql, finished);
  return next === null ? null : Math.max(now + BACKLOG_DELAY_MS, next);
}

/** When the oldest finished row expires, or null when there is none. */
export function nextPruneDue(sql: SqlStorage, finished: FinishedFlowStates): number | null {
  let oldest: number | null = null;
  const consider = (t: number | null) => {
    if (t !== null && (oldest === null || t < oldest)) oldest = t;
  };
  for (const [kind, states] of Object.entries(finished)) {
    for (const state of states)
      consider(
        sql
          .exec<{ t: number | null }>(
            "SELECT MIN(updated_at) AS t FROM flows WHERE kind = ? AND state = ?",
            kind,
            state,
          )
          .one().t,
      );
  }
  consider(
    sql.exec<{ t: number | null }>("SELECT MIN(delivered_at) AS t FROM outbox WHERE status = 'delivered'").one().t,
  );
  return oldest === null ? null : (oldest as number) + RETENTION_MS;
}

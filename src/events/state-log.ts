import type { StateChange } from "./state-kinds";

/**
 * The session's state log (docs/events.md, "changesSince"): the rows of the event log (event-log.ts) that
 * carry a state change in their `state` column, read through the partial index `events_state`, so a read
 * costs the page it returns whatever else the log holds. Beside them one row, `event_marks`, keeps
 *  - `state_head`: the highest seq of a state change ever written — the session's `stateVersion`; it
 *    survives the pruning of that event;
 *  - `pruned_state_through`: the highest seq of a state change that retention deleted — the exact
 *    watermark behind `historyGap`, recorded when the rows are deleted, never inferred from gaps in seqs
 *    (other events share the seq counter, so gaps prove nothing).
 * Both are written by the transaction that writes or prunes the event.
 */

/** Events one `changesSince` returns at most (docs/limits.md). */
export const STATE_CHANGES_MAX = 200;

export interface StateChanges {
  events: Array<StateChange & { sequence: number }>;
  truncated: boolean;
  earliestAvailableSequence: number;
  historyGap: boolean;
}

interface Marks {
  head: number;
  prunedThrough: number;
}

export function readMarks(sql: SqlStorage): Marks {
  const r = sql
    .exec<{ state_head: number; pruned_state_through: number }>(
      "SELECT state_head, pruned_state_through FROM event_marks WHERE id = 1",
    )
    .toArray()[0];
  return { head: r?.state_head ?? 0, prunedThrough: r?.pruned_state_through ?? 0 };
}

/** A state change was written at `seq` (inside the event's transaction). */
export function advanceHead(sql: SqlStorage, seq: number): void {
  sql.exec(
    `INSERT INTO event_marks (id, state_head, pruned_state_through) VALUES (1, ?, 0)
     ON CONFLICT (id) DO UPDATE SET state_head = MAX(state_head, excluded.state_head)`,
    seq,
  );
}

/**
 * Retention is about to delete every event with seq ≤ `through`: the newest state change among them
 * becomes the watermark. One seek of the partial index; called in the pruning transaction.
 */
export function notePruned(sql: SqlStorage, through: number): void {
  const newest = sql
    .exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM events WHERE state IS NOT NULL AND seq <= ?", through)
    .one().s;
  if (newest === null) return;
  sql.exec(
    `INSERT INTO event_marks (id, state_head, pruned_state_through) VALUES (1, ?, ?)
     ON CONFLICT (id) DO UPDATE SET pruned_state_through = MAX(pruned_state_through, excluded.pruned_state_through)`,
    newest,
    newest,
  );
}

/**
 * State changes after `since`, oldest first, at most STATE_CHANGES_MAX (one more is read to tell
 * `truncated`). `historyGap`: a change after `since` was pruned — or `since` is past every seq this
 * log handed out, which no version of this incarnation can be (a version read before the session was deleted or archived and
 * created again: seqs restart with the incarnation, event-ids.ts), so the caller must re-read whole state.
 */
export function changesSince(sql: SqlStorage, since: number, marks: Marks = readMarks(sql)): StateChanges {
  const rows = sql
    .exec<{ seq: number; state: string }>(
      "SELECT seq, state FROM events WHERE state IS NOT NULL AND seq > ? ORDER BY seq LIMIT ?",
      since,
      STATE_CHANGES_MAX + 1,
    )
    .toArray();
  const truncated = rows.length > STATE_CHANGES_MAX;
  const events = rows
    .slice(0, STATE_CHANGES_MAX)
    .map((r) => ({ sequence: r.seq, ...(JSON.parse(r.state) as StateChange) }));
  return {
    events,
    truncated,
    earliestAvailableSequence: earliestAvailable(sql, marks),
    historyGap: since < marks.prunedThrough || since > seqsHandedOut(sql),
  };
}

/**
 * What session_status reports of the log (src/session/status-rpc.ts): the head as `stateVersion`, and the
 * changes after `since` when asked — `event_marks` read once for both.
 */
export function stateSince(
  sql: SqlStorage,
  since: number | undefined,
): { stateVersion: number; stateChanges?: StateChanges } {
  const marks = readMarks(sql);
  if (since === undefined) return { stateVersion: marks.head };
  return { stateVersion: marks.head, stateChanges: changesSince(sql, since, marks) };
}

/** The last seq this incarnation's log handed out (AUTOINCREMENT's counter: pruning never lowers it). */
function seqsHandedOut(sql: SqlStorage): number {
  return sql.exec<{ seq: number }>("SELECT seq FROM sqlite_sequence WHERE name = 'events'").toArray()[0]?.seq ?? 0;
}

/** The oldest retained state change; head + 1 when none is retained; 0 when the session never had one. */
function earliestAvailable(sql: SqlStorage, marks: Marks): number {
  if (marks.head === 0) return 0;
  const oldest = sql.exec<{ s: number | null }>("SELECT MIN(seq) AS s FROM events WHERE state IS NOT NULL").one().s;
  return oldest ?? marks.head + 1;
}

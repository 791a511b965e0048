/**
 * The one way to read and write a row of a session's `flows` table (src/session/schema.ts): a flow's id,
 * kind, state and JSON data, written inside the caller's transaction together with the timers that move
 * it on. Finished states are pruned after the retention period (src/session/retention.ts).
 */
export interface FlowRowWrite {
  id: string;
  kind: string;
  state: string;
  data: unknown;
}

/**
 * "fail": the caller has checked that the id is new (a duplicate is a bug, so it throws);
 * "ignore": an existing row wins (idempotent creation); "update": the row moves to this state and data
 * (its `created_at` stays, so retention counts from when the flow began).
 */
export type FlowConflict = "fail" | "ignore" | "update";

const ON_CONFLICT: Record<FlowConflict, string> = {
  fail: "",
  ignore: " ON CONFLICT (id) DO NOTHING",
  update:
    " ON CONFLICT (id) DO UPDATE SET state = excluded.state, json = excluded.json, updated_at = excluded.updated_at",
};

export function putFlowRow(
  sql: SqlStorage,
  row: FlowRowWrite,
  onConflict: FlowConflict = "fail",
  now: number = Date.now(),
): void {
  sql.exec(
    `INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)${ON_CONFLICT[onConflict]}`,
    row.id,
    row.kind,
    row.state,
    JSON.stringify(row.data),
    now,
    now,
  );
}

/** The flow row `id` (only if of `kind`, when given): its state and parsed data. */
export function getFlowRow<T, S extends string = string>(
  sql: SqlStorage,
  id: string,
  kind?: string,
): { state: S; data: T } | null {
  const r = (
    kind === undefined
      ? sql.exec<{ state: string; json: string }>("SELECT state, json FROM flows WHERE id = ?", id)
      : sql.exec<{ state: string; json: string }>("SELECT state, json FROM flows WHERE id = ? AND kind = ?", id, kind)
  ).toArray()[0];
  return r ? { state: r.state as S, data: JSON.parse(r.json) as T } : null;
}

/**
 * Move flow `id` to `state` (replacing its data when given). `from`: only if it is still in that state
 * (a compare-and-set for steps two passes may race on).
 */
export function moveFlowRow(
  sql: SqlStorage,
  id: string,
  state: string,
  opts: { data?: unknown; from?: string; now?: number } = {},
): void {
  const now = opts.now ?? Date.now();
  const set = opts.data === undefined ? "state = ?, updated_at = ?" : "state = ?, json = ?, updated_at = ?";
  const setArgs = opts.data === undefined ? [state, now] : [state, JSON.stringify(opts.data), now];
  if (opts.from === undefined) sql.exec(`UPDATE flows SET ${set} WHERE id = ?`, ...setArgs, id);
  else sql.exec(`UPDATE flows SET ${set} WHERE id = ? AND state = ?`, ...setArgs, id, opts.from);
}

export function hasFlowRow(sql: SqlStorage, id: string): boolean {
  return sql.exec("SELECT 1 FROM flows WHERE id = ?", id).toArray().length > 0;
}

export function deleteFlowRow(sql: SqlStorage, id: string): void {
  sql.exec("DELETE FROM flows WHERE id = ?", id);
}

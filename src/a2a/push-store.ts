/**
 * The push-notification configs of A2A tasks (docs/protocols.md, "Push notifications"), stored in the session
 * object that owns the task's run, in `a2a_push_configs` (src/session/schema.ts): they survive eviction and
 * deploys with the run they watch, and the outbox reads them when it makes an attempt
 * (src/channels/outbox-attempts.ts). Plain SQL on the object's storage; callers hold the transaction.
 */

/** Configs one task may have at once (docs/limits.md): each state change is one delivery per config. */
export const MAX_PUSH_CONFIGS_PER_TASK = 5;
/** A config id: chosen by the client or a UUID; no `:` so a delivery's idempotency key splits back into it. */
export const PUSH_CONFIG_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const PUSH_TOKEN_MAX_CHARS = 512;
export const PUSH_CREDENTIALS_MAX_CHARS = 4096;

export type PushConfigRow = {
  run_id: string;
  id: string;
  url: string;
  token: string;
  auth_scheme: string | null;
  auth_credentials: string | null;
  created_at: number;
};

export function pushConfigsOf(sql: SqlStorage, runId: string): PushConfigRow[] {
  // Bounded by MAX_PUSH_CONFIGS_PER_TASK: put() refuses more.
  return sql
    .exec<PushConfigRow>("SELECT * FROM a2a_push_configs WHERE run_id = ? ORDER BY created_at, id", runId)
    .toArray();
}

export function pushConfig(sql: SqlStorage, runId: string, id: string): PushConfigRow | null {
  return (
    sql.exec<PushConfigRow>("SELECT * FROM a2a_push_configs WHERE run_id = ? AND id = ?", runId, id).toArray()[0] ??
    null
  );
}

/** Insert or replace one config; false when it is new and the task already has its maximum. */
export function putPushConfig(sql: SqlStorage, row: PushConfigRow): boolean {
  const replacing = pushConfig(sql, row.run_id, row.id) !== null;
  if (!replacing && pushConfigsOf(sql, row.run_id).length >= MAX_PUSH_CONFIGS_PER_TASK) return false;
  sql.exec(
    `INSERT INTO a2a_push_configs (run_id, id, url, token, auth_scheme, auth_credentials, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (run_id, id) DO UPDATE SET url = excluded.url, token = excluded.token,
       auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials`,
    row.run_id,
    row.id,
    row.url,
    row.token,
    row.auth_scheme,
    row.auth_credentials,
    row.created_at,
  );
  return true;
}

export function deletePushConfig(sql: SqlStorage, runId: string, id: string): boolean {
  return (
    sql.exec("DELETE FROM a2a_push_configs WHERE run_id = ? AND id = ? RETURNING 1", runId, id).toArray().length > 0
  );
}

/**
 * The idempotency key of one notification: one per config, task and state, so a retried run-end or a config
 * set again never sends the same state twice (src/channels/outbox.ts de-duplicates on it). It is also the
 * outbox's way back to the config at each attempt (`pushTargetOf`): run ids and config ids hold no `:`.
 */
export function pushDeliveryKey(configId: string, runId: string, state: string): string {
  return `a2a-push:${configId}:${runId}:${state}`;
}

export function pushTargetOf(idempotencyKey: string): { configId: string; runId: string } | null {
  const parts = idempotencyKey.split(":");
  if (parts.length !== 4 || parts[0] !== "a2a-push") return null;
  return { configId: parts[1], runId: parts[2] };
}

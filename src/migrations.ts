/**
 * One migration runner for every object's SQLite schema (the session object: src/session/schema.ts; the
 * registry object: src/registry/registry-object.ts). The version lives in a `schema_version` table because
 * `PRAGMA user_version` is not available in Durable Object SQLite. Steps run in order, each with the version
 * bump after it; an object runs this before serving any call (blockConcurrencyWhile), so no call sees a
 * half-migrated schema. Steps are append-only: a released step is never edited.
 */
export type MigrationStep = string | ((sql: SqlStorage) => void);

export function runMigrations(sql: SqlStorage, steps: readonly MigrationStep[]): void {
  sql.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  const row = sql.exec<{ version: number }>("SELECT version FROM schema_version").toArray()[0];
  let version = row?.version ?? 0;
  if (!row) sql.exec("INSERT INTO schema_version (version) VALUES (0)");
  while (version < steps.length) {
    const step = steps[version];
    if (typeof step === "string") sql.exec(step);
    else step(sql);
    version++;
    sql.exec("UPDATE schema_version SET version = ?", version);
  }
}

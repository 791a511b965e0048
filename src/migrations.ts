/**
 * One migration runner for every object's SQLite schema (the session object: src/session/schema.ts; the
 * registry object: src/registry/registry-object.ts). The version lives in a `schema_version` table because
 * `PRAGMA user_version` is not available in Durable Object SQLite. Steps run in order, each with the version
 * bump after it; an object runs this before serving any call (blockConcurrencyWhile), so no call sees a
 * half-migrated schema. Steps are append-only: a released step is never edited.
 */
export type MigrationStep = string | ((sql: SqlStorage) => void);

/**
 * The schema a step list ends with, as one script, taken from the first object this isolate migrated from
 * nothing with that list. Every later new object runs that script in one `exec` instead of replaying each
 * step — the ALTERs, index rebuilds and backfills of an empty database cost a new session's first message
 * about as much again as the tables themselves (docs/scale.md, test/migrations.test.ts).
 */
const schemaOf = new WeakMap<readonly MigrationStep[], string>();

/** Answers how many steps ran on an existing database (0: it was current; a new object's count is 0 too). */
export function runMigrations(sql: SqlStorage, steps: readonly MigrationStep[]): number {
  sql.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  const row = sql.exec<{ version: number }>("SELECT version FROM schema_version").toArray()[0];
  if (!row) {
    const script = schemaOf.get(steps);
    if (script !== undefined) {
      sql.exec(`${script};\nINSERT INTO schema_version (version) VALUES (${steps.length})`);
      return 0;
    }
    sql.exec("INSERT INTO schema_version (version) VALUES (0)");
  }
  const from = row?.version ?? 0;
  let version = from;
  while (version < steps.length) {
    const step = steps[version];
    if (typeof step === "string") sql.exec(step);
    else step(sql);
    version++;
    sql.exec("UPDATE schema_version SET version = ?", version);
  }
  if (!row) {
    rememberSchema(sql, steps);
    return 0;
  }
  return version - from;
}

/**
 * Keep the schema this new object now has: its tables and indexes in creation order (SQLite's own text,
 * which includes every column an ALTER added). Not when a step wrote rows — a script of the schema alone
 * would not carry them — so such a list keeps replaying its steps.
 */
function rememberSchema(sql: SqlStorage, steps: readonly MigrationStep[]): void {
  const objects = sql
    .exec<{ type: string; name: string; sql: string }>(
      `SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name <> 'schema_version'
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY rowid`,
    )
    .toArray();
  for (const o of objects)
    if (o.type === "table" && sql.exec(`SELECT 1 FROM "${o.name.replaceAll('"', '""')}" LIMIT 1`).toArray().length > 0)
      return;
  schemaOf.set(steps, objects.map((o) => o.sql).join(";\n"));
}

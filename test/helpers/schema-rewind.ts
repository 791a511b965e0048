import { MIGRATIONS } from "../../src/session/schema";

const CREATED = /CREATE (TABLE|INDEX) (?:IF NOT EXISTS )?(\w+)/g;
const CREATE_INDEX = /CREATE INDEX (?:IF NOT EXISTS )?(\w+) ON [^;]+/g;

/**
 * Put a session's schema back to just before the migration step that contains `marker`, as an older
 * version left it: every table, index and column that step and every later step of src/session/schema.ts
 * create is dropped, every index they drop is created again as the earlier step that made it wrote it, and
 * the version is set to that step — so `migrate` runs it and every later step again, however many are
 * appended. Rows a step wrote into an older table (a timer, an UPDATE) are the caller's to undo.
 */
export function rewindSchemaBefore(sql: SqlStorage, marker: string): void {
  const step = MIGRATIONS.findIndex((s) => typeof s === "string" && s.includes(marker));
  if (step < 0) throw new Error(`no migration step contains ${marker}`);
  // Undo the steps newest first, so each sees the schema it left behind.
  for (let i = MIGRATIONS.length - 1; i >= step; i--) {
    const script = MIGRATIONS[i];
    if (typeof script !== "string") continue;
    const created = [...script.matchAll(CREATED)];
    for (const kind of ["INDEX", "TABLE"])
      for (const [, k, name] of created) if (k === kind) sql.exec(`DROP ${kind} IF EXISTS ${name}`);
    // A column the step added to an earlier table goes too, or its ALTER would fail when it runs again
    // (after the indexes above, which may cover it).
    for (const [, table, column] of script.matchAll(/ALTER TABLE (\w+) ADD COLUMN (\w+)/g)) {
      const has = sql.exec("SELECT 1 FROM pragma_table_info(?) WHERE name = ?", table, column).toArray().length > 0;
      if (has) sql.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
    // An index the step dropped comes back, or its DROP INDEX would fail when it runs again.
    for (const [, name] of script.matchAll(/DROP INDEX (?:IF EXISTS )?(\w+)/g)) {
      const definition = earlierIndexDefinition(i, name);
      if (!definition) throw new Error(`no migration step before ${i} creates the index ${name}`);
      sql.exec(definition);
    }
  }
  sql.exec("UPDATE schema_version SET version = ?", step);
}

/** The last `CREATE INDEX name …` written by a step before `before`: the index as it stood when that step dropped it. */
function earlierIndexDefinition(before: number, name: string): string | undefined {
  for (let i = before - 1; i >= 0; i--) {
    const script = MIGRATIONS[i];
    if (typeof script !== "string") continue;
    const found = [...script.matchAll(CREATE_INDEX)].filter((m) => m[1] === name).pop();
    if (found) return found[0];
  }
  return undefined;
}

import { MIGRATIONS } from "../../src/session/schema";

/**
 * Put a session's schema back to just before the migration step that contains `marker`, as an older
 * version left it: every table and index a later step of src/session/schema.ts creates is dropped and the
 * version set to that step, so `migrate` runs it and every later step again — however many are appended.
 */
export function rewindSchemaBefore(sql: SqlStorage, marker: string): void {
  const step = MIGRATIONS.findIndex((s) => typeof s === "string" && s.includes(marker));
  if (step < 0) throw new Error(`no migration step contains ${marker}`);
  const later = MIGRATIONS.slice(step + 1).filter((s): s is string => typeof s === "string");
  for (const script of later.reverse()) {
    const created = [...script.matchAll(/CREATE (TABLE|INDEX) (?:IF NOT EXISTS )?(\w+)/g)];
    for (const kind of ["INDEX", "TABLE"])
      for (const [, k, name] of created) if (k === kind) sql.exec(`DROP ${kind} IF EXISTS ${name}`);
    // A column a later step added to an earlier table goes too, or its ALTER would fail when it runs again.
    for (const [, table, column] of script.matchAll(/ALTER TABLE (\w+) ADD COLUMN (\w+)/g)) {
      const has = sql.exec("SELECT 1 FROM pragma_table_info(?) WHERE name = ?", table, column).toArray().length > 0;
      if (has) sql.exec(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
  }
  sql.exec("UPDATE schema_version SET version = ?", step);
}

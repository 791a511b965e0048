import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type MigrationStep, runMigrations } from "../src/migrations";
import { MIGRATIONS, migrate } from "../src/session/schema";
import { rewindSchemaBefore } from "./helpers/schema-rewind";

/** Run `migrate` on a new object's database, counting its `exec` calls; answer its schema and version. */
function migrateNew(name: string, migrate: (sql: SqlStorage) => void) {
  return runInDurableObject(env.SESSIONS.getByName(name), (_obj, state) => {
    const sql = state.storage.sql;
    let execs = 0;
    const counting = {
      exec: (...args: Parameters<SqlStorage["exec"]>) => {
        execs++;
        return sql.exec(...args);
      },
    } as SqlStorage;
    migrate(counting);
    return {
      execs,
      version: sql.exec<{ version: number }>("SELECT version FROM schema_version").one().version,
      schema: sql
        .exec<{ type: string; name: string; sql: string | null }>(
          "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY name",
        )
        .toArray(),
      rows: sql.exec("SELECT name FROM sqlite_master WHERE name = 'a'").toArray().length
        ? sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM a").one().n
        : 0,
    };
  });
}

describe("migrations of a new object (src/migrations.ts)", () => {
  it("after the first new object, the next ones create the schema the steps build in one exec", async () => {
    const steps: MigrationStep[] = [
      "CREATE TABLE a (x INTEGER NOT NULL); CREATE INDEX a_x ON a (x);",
      "ALTER TABLE a ADD COLUMN y TEXT NOT NULL DEFAULT '';",
      "DROP INDEX a_x; CREATE INDEX a_xy ON a (x, y);",
      (sql) => sql.exec("UPDATE a SET y = 'z' WHERE y = ''"),
      "CREATE TABLE b (seq INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);",
    ];
    const first = await migrateNew("agent:main:mig-first", (sql) => runMigrations(sql, steps));
    const second = await migrateNew("agent:main:mig-second", (sql) => runMigrations(sql, steps));
    // create schema_version, read it, mark version 0, then each step and its version bump (and the schema kept)
    expect(first.execs).toBeGreaterThanOrEqual(3 + 2 * steps.length);
    // create schema_version, read it, then one script that ends by recording the version
    expect(second.execs).toBe(3);
    expect(second.version).toBe(steps.length);
    expect(second.schema).toEqual(first.schema);
    expect(second.schema.map((o) => o.name)).toEqual(["a", "a_xy", "b", "schema_version", "sqlite_sequence"]);
    // A step added later applies to an object made from the script like to any other.
    const more = await migrateNew("agent:main:mig-second", (sql) =>
      runMigrations(sql, [...steps, "ALTER TABLE b ADD COLUMN w INTEGER;"]),
    );
    expect(more.version).toBe(steps.length + 1);
    expect(more.schema.find((o) => o.name === "b")?.sql).toContain("w INTEGER");
  });

  it("steps that write rows are replayed for every new object, so each gets the rows", async () => {
    const steps: MigrationStep[] = ["CREATE TABLE a (x INTEGER);", "INSERT INTO a (x) VALUES (1);"];
    await migrateNew("agent:main:mig-rows-1", (sql) => runMigrations(sql, steps));
    const second = await migrateNew("agent:main:mig-rows-2", (sql) => runMigrations(sql, steps));
    expect(second.execs).toBeGreaterThanOrEqual(3 + 2 * steps.length);
    expect(second.rows).toBe(1);
  });

  it("a session object's schema made from the script is the schema its steps build", async () => {
    // A copy of the list is a list this isolate never scripted: it replays every step.
    const replayed = await migrateNew("agent:main:mig-session-replayed", (sql) => runMigrations(sql, [...MIGRATIONS]));
    await migrateNew("agent:main:mig-session-1", (sql) => runMigrations(sql, MIGRATIONS));
    const scripted = await migrateNew("agent:main:mig-session-2", (sql) => runMigrations(sql, MIGRATIONS));
    expect(scripted.execs).toBe(3);
    expect(scripted.version).toBe(MIGRATIONS.length);
    expect(scripted.schema).toEqual(replayed.schema);
  });

  it("rewindSchemaBefore (test/helpers/schema-rewind.ts) leaves any step and the ones after it re-runnable", async () => {
    // Tests rewind a session to before a step to prove an old session's upgrade: for every step, the migration
    // must run again from there and end with exactly the schema a new object gets.
    await runInDurableObject(env.SESSIONS.getByName("agent:main:mig-rewind"), (_obj, state) => {
      const sql = state.storage.sql;
      const schemaOf = () =>
        sql
          .exec<{ type: string; name: string; tbl_name: string; sql: string | null }>(
            `SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE '\\_cf\\_%' ESCAPE '\\'
               AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`,
          )
          .toArray();
      migrate(sql);
      const current = schemaOf();
      expect(current.map((o) => o.name)).toContain("search_feed");
      MIGRATIONS.forEach((step, i) => {
        if (typeof step !== "string") return;
        // The whole step is a marker no other step contains.
        rewindSchemaBefore(sql, step);
        expect(sql.exec<{ version: number }>("SELECT version FROM schema_version").one().version).toBe(i);
        expect({ step: i, ran: migrate(sql) }).toEqual({ step: i, ran: MIGRATIONS.length - i });
        expect({ step: i, schema: schemaOf() }).toEqual({ step: i, schema: current });
      });
    });
  });
});

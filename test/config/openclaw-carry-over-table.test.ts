import { describe, expect, it } from "vitest";
import DOC from "../../docs/openclaw-carry-over.md?raw";
import { LEGACY_KEYS } from "../../src/config/carry-over";
import { ConfigSchema } from "../../src/config/schema";
import { schemaKeyPaths } from "../../src/config/schema-walk";

/**
 * docs/openclaw-carry-over.md has a row for every config key the code reads: the keys of the CONFIG zod
 * schema (walked by src/config/schema-walk.ts, so a key added to the schema is found without a list to
 * keep) and the legacy keys read only on their way to a current one (src/config/carry-over.ts LEGACY_KEYS).
 */

/** The key paths the doc's tables name, in the schema walk's notation (`*` for a map key, `[]` for a list item). */
function documentedKeys(doc: string): Set<string> {
  const keys = new Set<string>();
  for (const line of doc.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const cell = line.split(" | ")[0];
    let last = "";
    for (const [, raw] of cell.matchAll(/`([^`]+)`/g)) {
      const path = raw.replace(/<[^>]+>/g, "*");
      if (!path.startsWith(".")) {
        keys.add(path);
        last = path;
        continue;
      }
      // `.x` continues the cell's last full key: below it (`session.sendPolicy`, `.default`) or beside it
      // (`agents.entries.<id>.subagents`, `.subagents.model`).
      keys.add(last + path);
      keys.add(last.slice(0, last.lastIndexOf(".")) + path);
    }
  }
  return keys;
}

describe("docs/openclaw-carry-over.md", () => {
  it("has a row for every config key the code reads", () => {
    const read = [...schemaKeyPaths(ConfigSchema), ...LEGACY_KEYS];
    const documented = documentedKeys(DOC);
    expect(read.filter((k) => !documented.has(k))).toEqual([]);
    // The walk finds nested keys (not only the top level), so the check has teeth.
    expect(read).toEqual(
      expect.arrayContaining(["agents.entries.*.thinkingDefault", "models.providers.*.models[].cost.input"]),
    );
  });

  it("reads the doc's notation: `<id>` is any key, `.x` continues the cell's last key", () => {
    const keys = documentedKeys("| `a.<id>.b`, `.b.c` | x |\n| `s.p`, `.d`, `.r[].m` | y |\nnot a row `z.z`");
    expect(keys.has("a.*.b.c")).toBe(true);
    expect(keys.has("s.p.d")).toBe(true);
    expect(keys.has("s.p.r[].m")).toBe(true);
    expect(keys.has("z.z")).toBe(false);
  });
});

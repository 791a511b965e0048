/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import DOC from "../../docs/openclaw-2026-coverage.md?raw";
import { TOOLS } from "../../src/tools/registry";

/**
 * docs/openclaw-2026-coverage.md holds the tools to OpenClaw 2026's orchestration set row by row. Kept honest
 * here: a parameter marked implemented (or implemented differently) is a key of the tool's zod schema and one
 * marked not implemented is not; every key of those schemas has a row; an exact text marked implemented
 * appears in a source file its row cites; every cited file exists.
 */

const SOURCES = Object.fromEntries(
  Object.entries(
    import.meta.glob<string>(["../../src/**/*.ts", "!../../src/**/*.d.ts"], {
      query: "?raw",
      import: "default",
      eager: true,
    }),
  ).map(([path, text]) => [path.slice(6), text]),
);
/** Every test file as `test/<folder>/<file>` (vite names this folder's own files `./…`). */
const TEST_FILES = new Set(
  Object.keys(import.meta.glob("../**/*.test.ts")).map((p) =>
    p.startsWith("./") ? `test/tools/${p.slice(2)}` : `test/${p.slice(3)}`,
  ),
);
const STATUSES = ["implemented", "differently", "not implemented"] as const;

interface Row {
  /** The `### …` heading above the row's table. */
  section: string;
  cells: string[];
  line: number;
}

function rowsOf(doc: string): Row[] {
  const rows: Row[] = [];
  let section = "";
  doc.split("\n").forEach((text, i) => {
    if (text.startsWith("#")) section = text.replace(/^#+\s*/, "");
    if (!text.startsWith("| ") || /^\|[-| ]+\|$/.test(text)) return;
    const cells = text
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim());
    if (cells[1] === "Status") return; // a header
    rows.push({ section, cells, line: i + 1 });
  });
  return rows;
}

const code = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
const where = (r: Row) => `docs/openclaw-2026-coverage.md:${r.line}`;
/** A string literal as the source spells it: escaped quotes read as the quotes. */
const unescaped = (text: string) => text.replaceAll('\\"', '"').replaceAll("\\'", "'");

function schemaKeys(tool: string): string[] {
  const def = TOOLS.find((t) => t.name === tool);
  if (!def) throw new Error(`no tool ${tool}`);
  return Object.keys((def.schema as unknown as z.ZodObject).shape);
}

const ROWS = rowsOf(DOC);
const toolOf = (section: string, kind: "parameters" | "texts") => new RegExp(`^\`(\\w+)\` ${kind}$`).exec(section)?.[1];

describe("docs/openclaw-2026-coverage.md", () => {
  it("every row has its five cells, a known status, and cites files that exist", () => {
    expect(ROWS.length).toBeGreaterThan(120);
    const bad: string[] = [];
    for (const r of ROWS) {
      if (r.cells.length !== 5) bad.push(`${where(r)}: ${r.cells.length} cells (a | inside a cell?)`);
      const [, status, source, tests] = r.cells;
      if (!(STATUSES as readonly string[]).includes(status)) bad.push(`${where(r)}: status "${status}"`);
      for (const path of code(source ?? "")) if (!(path in SOURCES)) bad.push(`${where(r)}: no ${path}`);
      for (const path of code(tests ?? "")) if (!TEST_FILES.has(path)) bad.push(`${where(r)}: no ${path}`);
      if ((status === "implemented" || status === "differently") && code(source ?? "").length === 0)
        bad.push(`${where(r)}: ${status} without a source file`);
    }
    expect(bad).toEqual([]);
  });

  it("a parameter is in the tool's schema exactly when the table says it is there, and every schema key has a row", () => {
    const tools = new Set<string>();
    const bad: string[] = [];
    for (const r of ROWS) {
      const tool = toolOf(r.section, "parameters");
      if (!tool) continue;
      tools.add(tool);
      const name = code(r.cells[0])[0];
      const present = schemaKeys(tool).includes(name);
      const claimed = r.cells[1] === "implemented" || r.cells[1] === "differently";
      if (present !== claimed)
        bad.push(`${where(r)}: ${tool}.${name} is ${r.cells[1]} but ${present ? "in" : "not in"} its schema`);
    }
    for (const tool of tools) {
      const named = new Set(
        ROWS.filter((r) => toolOf(r.section, "parameters") === tool).map((r) => code(r.cells[0])[0]),
      );
      for (const key of schemaKeys(tool)) if (!named.has(key)) bad.push(`${tool}.${key} has no row`);
    }
    expect([...tools].sort()).toEqual([
      "session_status",
      "sessions_search",
      "sessions_send",
      "sessions_yield",
      "subagents",
    ]);
    expect(bad).toEqual([]);
  });

  it("an exact text marked implemented appears in a source file its row cites (`<…>` parts are placeholders)", () => {
    const bad: string[] = [];
    let checked = 0;
    for (const r of ROWS) {
      if (!toolOf(r.section, "texts") || r.cells[1] !== "implemented") continue;
      const text = code(r.cells[0])[0];
      const sources = code(r.cells[2]).map((p) => unescaped(SOURCES[p] ?? ""));
      const fragments = text.split(/<[^>]+>/).filter((f) => f.length >= 8);
      expect(fragments.length, where(r)).toBeGreaterThan(0);
      for (const f of fragments)
        if (!sources.some((s) => s.includes(f))) bad.push(`${where(r)}: "${f}" not in ${r.cells[2]}`);
      checked++;
    }
    expect(checked).toBeGreaterThan(30);
    expect(bad).toEqual([]);
  });

  it("reads the doc's tables: sections, cells, placeholders", () => {
    const rows = rowsOf(
      "### `x` texts\n\n| Text | Status | a | b | c |\n|---|---|---|---|---|\n| `a <n> b` | implemented | `s` | | |",
    );
    expect(rows).toEqual([{ section: "`x` texts", cells: ["`a <n> b`", "implemented", "`s`", "", ""], line: 5 }]);
    expect(toolOf(rows[0].section, "texts")).toBe("x");
  });
});

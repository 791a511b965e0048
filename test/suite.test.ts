/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import agentsMd from "../AGENTS.md?raw";
import rootReadme from "../README.md?raw";
import fixturesReadme from "./fixtures/openclaw/README.md?raw";
import readme from "./README.md?raw";
import self from "./suite.test.ts?raw";

/**
 * The test suite describes itself: test/README.md maps every test file to what it proves, and tests cite
 * only what a reader of this repository has (its files), never the sections of documents kept elsewhere.
 */

/**
 * Every test file, both projects (test/node/ included), as `test/<path>`; read as text, never run here.
 * A glob leaves out the file that makes it, so this one is added by name.
 */
const SOURCES: Record<string, string> = {
  ...Object.fromEntries(
    Object.entries(import.meta.glob<string>("./**/*.test.ts", { query: "?raw", import: "default", eager: true })).map(
      ([path, text]) => [`test/${path.slice(2)}`, text],
    ),
  ),
  "test/suite.test.ts": self,
};
/** The helpers and setup the tests share: they must not cite elsewhere either. */
const SUPPORT = import.meta.glob<string>(["./helpers/*.ts", "./setup.ts"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** The test files test/README.md's map names (its table rows, however the formatter pads them), in order. */
function mapped(): string[] {
  return [...readme.matchAll(/^\| `(test\/[^`]+\.test\.ts)`\s*\|/gm)].map((m) => m[1]);
}

/**
 * Citations of what the repository does not hold: section signs, the design document, issue numbers,
 * project rounds, machine paths. "Round 1 reply" is a text of the agent-to-agent flow, not a round of work.
 */
const FOREIGN = [/§/, /\bDESIGN\b/, /\b[Ii]ssues? #?\d/, /\b[Rr]ound \d+(?! reply)/, /\/work\//, /\breference §/i];

describe("test/README.md", () => {
  it("maps every test file, once, and only files that exist", () => {
    const files = Object.keys(SOURCES).sort();
    const rows = mapped();
    expect(files.length).toBeGreaterThan(60);
    expect(
      files.filter((f) => !rows.includes(f)),
      "test files missing from test/README.md",
    ).toEqual([]);
    expect(
      rows.filter((r) => !files.includes(r)),
      "rows of test/README.md naming no test file",
    ).toEqual([]);
    expect(rows.filter((r, i) => rows.indexOf(r) !== i)).toEqual([]);
  });

  it("says what each file proves", () => {
    for (const row of readme.matchAll(/^\| `(test\/[^`]+\.test\.ts)`\s*\| (.*) \|$/gm))
      expect(row[2].trim().length, `${row[1]}: what it proves`).toBeGreaterThan(20);
  });

  it("puts each test beside its src/ folder: test/<folder>/ exists only for a src/<folder>/ (or bench/, node/)", () => {
    const srcFolders = new Set(Object.keys(import.meta.glob("../src/*/**/*.ts")).map((p) => p.split("/")[2]));
    const testFolders = new Set(
      Object.keys(SOURCES)
        .map((f) => f.split("/"))
        .filter((parts) => parts.length > 2)
        .map((parts) => parts[1]),
    );
    for (const folder of testFolders)
      expect(
        srcFolders.has(folder) || folder === "bench" || folder === "node",
        `test/${folder}/ mirrors src/${folder}/`,
      ).toBe(true);
  });
});

describe("citations", () => {
  it("no test, helper or setup file cites a document the repository does not hold", () => {
    const found: string[] = [];
    // This file is left out: its own examples below are citations on purpose.
    const scanned = [...Object.entries(SOURCES), ...Object.entries(SUPPORT)].filter(
      ([f]) => f !== "test/suite.test.ts",
    );
    for (const [file, text] of scanned)
      text.split("\n").forEach((line, i) => {
        if (FOREIGN.some((re) => re.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    expect(found).toEqual([]);
  });

  it("the check itself catches each kind of citation", () => {
    for (const line of [
      'describe("visibility (reference §6)"',
      "// DESIGN bar",
      "(issue 10 item 4)",
      "// added in round 3",
      "see /work/shared/spec",
    ])
      expect(
        FOREIGN.some((re) => re.test(line)),
        line,
      ).toBe(true);
    expect(FOREIGN.some((re) => re.test('expect(announce).toContain("Round 1 reply: initial")'))).toBe(false);
  });
});

/** The prose a reader follows: what it says is proven by a file must name a file that is there. */
const PROSE: Record<string, string> = {
  "README.md": rootReadme,
  "AGENTS.md": agentsMd,
  "test/README.md": readme,
  "test/fixtures/openclaw/README.md": fixturesReadme,
  ...Object.fromEntries(
    Object.entries(import.meta.glob<string>("../docs/*.md", { query: "?raw", import: "default", eager: true })).map(
      ([path, text]) => [path.slice(3), text],
    ),
  ),
};
/** Every file of the folders prose cites, as `<folder>/<path>` (keys only: nothing is loaded); a glob leaves out this file. */
const REPO_FILES = [
  ...Object.keys(
    import.meta.glob(["../src/**/*", "./**/*", "../docs/**/*", "../scripts/**/*", "../console/**/*", "../bench/**/*"]),
  ).map((p) => (p.startsWith("./") ? `test/${p.slice(2)}` : p.slice(3))),
  "test/suite.test.ts",
];
/**
 * Paths prose names that are not in the repository on purpose: written by a run (`npm run bench`), or the
 * example of a file a recipe would add.
 */
const NOT_COMMITTED = new Set(["bench/out/results.md", "src/http/routes/a2a.ts"]);
/** A repository path in prose (`test/session/runs.test.ts`, `test/spawn/subagent-*.test.ts`); `<…>` placeholders are skipped. `tsx` is tried before `ts`, or `console/tasks.tsx` would be read as `console/tasks.ts`. */
const CITED_PATH =
  /(?<![\w./-])((?:src|test|docs|scripts|console|bench)\/[\w./*<>-]+\.(?:tsx|ts|md|mjs|json|css|html|png))/g;

describe("paths in the docs", () => {
  it("every file README.md, AGENTS.md, docs/ and the test maps cite exists (a glob matches at least one)", () => {
    expect(REPO_FILES.length).toBeGreaterThan(300);
    const missing: string[] = [];
    for (const [doc, text] of Object.entries(PROSE))
      text.split("\n").forEach((line, i) => {
        for (const [, path] of line.matchAll(CITED_PATH)) {
          if (path.includes("<") || NOT_COMMITTED.has(path)) continue;
          const re = new RegExp(`^${path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", "[^/]*")}$`);
          if (!REPO_FILES.some((f) => re.test(f))) missing.push(`${doc}:${i + 1}: ${path}`);
        }
      });
    expect(Object.keys(PROSE).length).toBeGreaterThan(15);
    expect(missing).toEqual([]);
  });
});

/**
 * Every file a reader opens stays readable in one sitting: AGENTS.md asks for files under ~400 lines. The
 * check allows 450, so a file a little over is a prompt to split it, not a failed build at the first line.
 */
const MAX_LINES = 450;
const CODE: Record<string, string> = {
  ...Object.fromEntries(
    Object.entries(
      import.meta.glob<string>(
        [
          "../src/**/*.ts",
          "./**/*.ts",
          "../console/**/*.{ts,tsx}",
          "../bench/**/*.{ts,mjs}",
          "../scripts/**/*.mjs",
          "!../**/*.d.ts",
        ],
        { query: "?raw", import: "default", eager: true },
      ),
    ).map(([path, text]) => [path.startsWith("./") ? `test/${path.slice(2)}` : path.slice(3), text]),
  ),
  "test/suite.test.ts": self,
};

describe("file sizes", () => {
  it(`no source, test, console, bench or script file is longer than ${MAX_LINES} lines`, () => {
    expect(Object.keys(CODE).length).toBeGreaterThan(300);
    const long = Object.entries(CODE)
      .map(([file, text]) => [file, text.split("\n").length] as const)
      .filter(([, n]) => n > MAX_LINES)
      .map(([file, n]) => `${file}: ${n} lines`);
    expect(long).toEqual([]);
  });
});

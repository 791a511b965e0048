/// <reference types="vite/client" />
import { runInDurableObject } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import architecture from "../docs/architecture.md?raw";
import contract from "../docs/contract.md?raw";
import timersDoc from "../docs/timers.md?raw";
import { SESSION_EXTENSIONS, sessionExtensions } from "../src/extensions";
import { createApp } from "../src/http/app";
import { CORE_TIMER_KINDS } from "../src/session/core-timers";
import { type SessionExtension, SessionExtensions } from "../src/session/extensions";
import type { SessionObject } from "../src/session/session-object";
import type { ToolDefinition } from "../src/tools/definition";
import { TOOLS } from "../src/tools/registry";
import { sessionStub } from "./helpers/http";

/**
 * The recipes of AGENTS.md, kept true: a tool, a timer kind, a session extension or a route added
 * without one of its steps fails here. Every module of src/ is loaded and its exports inspected.
 */

const SRC = import.meta.glob<Record<string, unknown>>(["../src/**/*.ts", "!../src/**/*.d.ts"], { eager: true });
const TEST_FILES = new Set(Object.keys(import.meta.glob("./**/*.test.ts")).map((p) => `test/${p.slice(2)}`));

/** Every export of src/ with the module that exports it (`src/<path>`). */
const EXPORTS = Object.entries(SRC).flatMap(([path, mod]) =>
  Object.entries(mod).map(([name, value]) => ({ file: path.slice(3), name, value })),
);

const isTool = (v: unknown): v is ToolDefinition =>
  typeof v === "object" && v !== null && "schema" in v && "handler" in v && "subagents" in v && "name" in v;

const HOOKS = [
  "onRunEnded",
  "afterRunEnded",
  "timers",
  "onTimer",
  "produceReply",
  "forwardInbound",
  "holdsQueuedRun",
  "holdsRun",
  "onDeliveryDead",
  "beforeDelete",
  "finishedFlows",
  "rpc",
];
const isExtension = (v: unknown): v is SessionExtension =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as { name?: unknown }).name === "string" &&
  !isTool(v) &&
  HOOKS.some((h) => h in v);

const dashed = (tool: string) => tool.replace(/_/g, "-");

/** A markdown table row's cells, split on unescaped pipes, padding trimmed (a formatter may pad them). */
const cells = (line: string) =>
  line
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());

/** The rows of a markdown table whose first cell is a backticked name: name → the other cells. */
function tableRows(doc: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of doc.split("\n")) {
    const m = /^\| `([^`]+)`\s*\|/.exec(line);
    if (m) rows.set(m[1], cells(line).slice(1));
  }
  return rows;
}

describe("Add a tool", () => {
  const tools = EXPORTS.filter((e) => isTool(e.value));

  it("every tool a module of src/ defines is in the registry, once, and lives in src/tools/<tool-name>.ts", () => {
    expect(tools.length).toBeGreaterThanOrEqual(TOOLS.length);
    for (const t of tools) expect(TOOLS, `${t.file} ${t.name} is listed in src/tools/registry.ts`).toContain(t.value);
    for (const tool of TOOLS) {
      const homes = tools.filter((t) => t.value === tool).map((t) => t.file);
      expect(homes, `${tool.name} is defined in its own module`).toEqual([`src/tools/${dashed(tool.name)}.ts`]);
    }
    expect(new Set(TOOLS.map((t) => t.name)).size).toBe(TOOLS.length);
    for (const t of TOOLS) expect(t.name).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });

  it("every tool has its test file", () => {
    for (const t of TOOLS)
      expect(TEST_FILES, `test/tools/${dashed(t.name)}.test.ts`).toContain(`test/tools/${dashed(t.name)}.test.ts`);
  });

  it("every tool has its row in docs/contract.md, and the row says which sub-agents get it, as the definition does", () => {
    const rows = tableRows(contract.slice(contract.indexOf("## Tools"), contract.indexOf("## Endpoints")));
    const said = { all: "every sub-agent", orchestrators: "orchestrators", none: "with an allow" } as const;
    for (const t of TOOLS) {
      const row = rows.get(t.name);
      expect(row, `docs/contract.md has a row for ${t.name}`).toBeDefined();
      expect(row!.at(-1), `${t.name}: sub-agents`).toBe(said[t.subagents]);
    }
    expect([...rows.keys()].sort()).toEqual(TOOLS.map((t) => t.name).sort());
  });

  it("a waiting tool's wait argument is one of its parameters, a number", () => {
    for (const t of TOOLS.filter((x) => x.wait)) {
      const shape = t.schema.shape as Record<
        string,
        { def?: { type?: string; innerType?: { def: { type: string } } } }
      >;
      const arg = shape[t.wait!.argument];
      expect(arg, `${t.name}.${t.wait!.argument}`).toBeDefined();
      expect(arg.def?.innerType?.def.type ?? arg.def?.type).toBe("number");
    }
  });
});

describe("Add a timer kind", () => {
  const kinds = sessionExtensions.timerKinds;

  it("every *_TIMER constant of src/ names a declared kind", () => {
    const named = EXPORTS.filter((e) => e.name.endsWith("_TIMER") && typeof e.value === "string");
    expect(named.length).toBeGreaterThan(10);
    for (const e of named)
      expect(kinds.has(e.value as string), `${e.file} ${e.name} = "${e.value}" is declared`).toBe(true);
  });

  it("every declared kind has a row in docs/timers.md whose attempts and backoff are its policy", () => {
    const table = timersDoc.split("\n").filter((l) => l.startsWith("| `") || l.startsWith("| every other kind"));
    for (const kind of kinds.names()) {
      const line = table.find((l) => cells(l)[0].includes(`\`${kind}\``));
      expect(line, `docs/timers.md documents ${kind}`).toBeDefined();
      const [, attempts, backoff] = cells(line!);
      const p = kinds.policy(kind);
      expect(Number(attempts), `${kind}: attempts`).toBe(p.maxAttempts);
      const seconds = (ms: number) => (ms >= 60_000 ? `${ms / 60_000} min` : `${ms / 1000} s`);
      expect(backoff, `${kind}: backoff`).toBe(`${seconds(p.baseDelayMs)} → ${seconds(p.maxDelayMs)}`);
      if (!kinds.isRetryable(kind)) expect(line, `${kind} says it is not retryable`).toMatch(/not retryable/);
    }
  });

  it("a timer of an undeclared kind cannot be set: the alarm would drop it unrun", async () => {
    await runInDurableObject(sessionStub("agent:main:recipes-timer"), async (obj: SessionObject) => {
      await obj.ensureSession();
      expect(() => obj.timers.set("no-such-kind", "r", Date.now())).toThrow(
        /Timer kind "no-such-kind" is not declared/,
      );
      obj.timers.set(CORE_TIMER_KINDS[0], "queue", Date.now() + 60_000);
    });
  });

  it("a kind declared twice, or timers without their onTimer, are refused when the extensions are installed", () => {
    const run = () => {};
    expect(() => new SessionExtensions([{ name: "a", timers: { pump: {} }, onTimer: run }], CORE_TIMER_KINDS)).toThrow(
      /Timer kind "pump" is declared twice/,
    );
    expect(
      () =>
        new SessionExtensions(
          [
            { name: "a", timers: { x: {} }, onTimer: run },
            { name: "b", timers: { x: {} }, onTimer: run },
          ],
          [],
        ),
    ).toThrow(/declared twice/);
    expect(() => new SessionExtensions([{ name: "a", timers: { x: {} } }], [])).toThrow(/together/);
    expect(() => new SessionExtensions([{ name: "a", onTimer: run }], [])).toThrow(/together/);
  });
});

describe("Add a session extension", () => {
  it("every extension a module of src/ exports is installed in src/extensions.ts", () => {
    const exported = EXPORTS.filter((e) => isExtension(e.value));
    for (const e of exported)
      expect(SESSION_EXTENSIONS, `${e.file} ${e.name} is in SESSION_EXTENSIONS`).toContain(e.value);
    expect(exported.length).toBe(SESSION_EXTENSIONS.length);
  });

  it("every installed extension has its row in docs/architecture.md, in the order it is installed", () => {
    const rows = [...tableRows(architecture).keys()].filter((name) => SESSION_EXTENSIONS.some((e) => e.name === name));
    expect(rows).toEqual(SESSION_EXTENSIONS.map((e) => e.name));
  });

  it("two extensions with one name are refused when the extensions are installed", () => {
    expect(() => new SessionExtensions([{ name: "a" }, { name: "a" }], [])).toThrow(
      /Two session extensions are named "a"/,
    );
  });
});

describe("Add a route", () => {
  it("every sub-app of src/http/routes/ is mounted in the app", () => {
    const app = createApp();
    const subApps = EXPORTS.filter((e) => e.file.startsWith("src/http/routes/") && e.value instanceof Hono);
    expect(subApps.length).toBeGreaterThanOrEqual(5);
    for (const { file, name, value } of subApps)
      for (const r of (value as Hono).routes)
        expect(
          app.routes.some((a) => a.method === r.method && a.handler === r.handler),
          `${file} ${name}: ${r.method} ${r.path} is served`,
        ).toBe(true);
  });
});

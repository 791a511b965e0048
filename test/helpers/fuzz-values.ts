import fc from "fast-check";
import { GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN } from "./http";

/**
 * The values and requests of the generated bad-input suite (test/http/bad-input-properties.test.ts): wrong
 * types, boundary and non-finite numbers (sent as raw JSON such as `1e400`, which JSON.stringify cannot
 * produce), huge and unicode strings, NUL and control characters, deep nesting, huge arrays, unknown fields;
 * session keys valid, invalid and fresh; JSON-RPC junk for /mcp and bodies that are not JSON objects.
 */

/** Lone surrogates replaced: URLs and header values cannot carry them (JSON bodies still do, escaped). */
export const wellFormed = (s: string) =>
  s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

// ---------------------------------------------------------------- raw JSON

/** A JSON token written verbatim (non-finite and out-of-range numbers, deep nesting). */
export class Raw {
  constructor(readonly text: string) {}
  toString() {
    return `Raw(${this.text.length > 40 ? `${this.text.slice(0, 40)}…` : this.text})`;
  }
}

export function toJson(v: unknown): string {
  if (v instanceof Raw) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

// ---------------------------------------------------------------- generators

export const KEYS_VALID = [
  "main",
  "current",
  "agent:main:main",
  "agent:research:main",
  "agent:main:fz-seed",
  "agent:main:telegram:group:g1",
  "agent:main:discord:channel:c1:thread:t1",
  "cron:job-1",
  "hook:3f1c2a9e-0000-4000-8000-000000000001",
  "node-n1",
  "agent:main:subagent:3f1c2a9e-0000-4000-8000-000000000002",
  "global",
  "unknown",
  "3f1c2a9e-0000-4000-8000-000000000003",
];
export const KEYS_BAD = [
  "",
  " ",
  ":",
  "agent:",
  "agent::main",
  "agent:Main:x",
  "agent:main:",
  "agent:../x",
  "a".repeat(600),
  `agent:main:${"x".repeat(520)}`,
  "\u0000",
  "agent:main:\u0000",
  "agent:main:%2F",
  "🙂",
  "agent:🙂:main",
  "__proto__",
  "constructor",
];

export const numbersRaw = fc.constantFrom(
  "1e400",
  "-1e400",
  "1e-400",
  "-0",
  "9007199254740993",
  "1.7976931348623157e308",
  "123456789012345678901234567890",
  "0.0000001",
  "1E2",
  "-1",
);
export const numbers = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    0.5,
    1.5,
    2 ** 31,
    2 ** 53,
    -(2 ** 53),
    1e21,
    1e308,
    -1e308,
    5e-324,
    Number.MAX_SAFE_INTEGER,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  numbersRaw.map((t) => new Raw(t)),
);
export const controlString = fc
  .array(fc.integer({ min: 0, max: 0x1f }), { maxLength: 12 })
  .map((cs) => String.fromCharCode(...cs));
export const strings = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ unit: "binary", maxLength: 24 }),
  fc.string({ unit: "grapheme", maxLength: 24 }),
  controlString,
  fc.constantFrom(
    "",
    " ",
    "\u0000",
    "\u202e",
    "\ud800",
    "null",
    "true",
    "0",
    "NaN",
    "Infinity",
    "-1",
    "1e400",
    "/send off",
    "main",
    "group",
    "__proto__",
  ),
  fc.constantFrom(100_000, 600_000).map((n) => "x".repeat(n)),
  fc.constant("é".repeat(200_000)),
  fc.constant("\u0000".repeat(50_000)),
);
export const deep = fc.integer({ min: 50, max: 3000 }).map((d) => new Raw("[".repeat(d) + "]".repeat(d)));
export const deepObject = fc
  .integer({ min: 50, max: 1500 })
  .map((d) => new Raw(`${'{"a":'.repeat(d)}1${"}".repeat(d)}`));
export const leaf = fc.oneof(fc.constantFrom(null, true, false), numbers, strings);
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  { weight: 2, arbitrary: fc.array(leaf, { maxLength: 5 }) },
  { weight: 2, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), leaf, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(5_000, 60_000).map((n) => new Array(n).fill("group")) },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: deepObject },
);

/** A field's plausible values (the mutation below supplies the junk). */
export const field = (plausible: fc.Arbitrary<unknown>) => plausible;
export const keyArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...KEYS_VALID) },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS_BAD) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
);
/** Mostly null: an optional extra that is present now and then. */
export const rarely = <T>(a: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: a });
export const unknownFields = fc.dictionary(
  fc.string({ maxLength: 12 }).filter((k) => !/^[a-z]/i.test(k) || k.length > 10),
  junk,
  { maxKeys: 2 },
);

/**
 * An object of plausible fields (each present or not) with, most of the time, exactly one field — known or
 * unknown — replaced by junk: so a request gets past the other checks and the bad value reaches deep code.
 */
export function objectOf(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  const names = Object.keys(fields);
  return fc
    .tuple(
      fc.record(fields, { requiredKeys: [] }),
      fc.oneof(
        { weight: 1, arbitrary: fc.constant(null) },
        { weight: 4, arbitrary: fc.constantFrom(...names, "$unknown", "$unknown") },
      ),
      junk,
      unknownFields,
    )
    .map(([known, mutated, bad, extra]) => {
      const out: Record<string, unknown> = { ...known };
      if (mutated === "$unknown") Object.assign(out, extra);
      else if (mutated !== null) out[mutated] = bad;
      return out;
    });
}

// ---------------------------------------------------------------- requests

/** Who calls: mostly the operator, now and then an agent token. */
export const tokenArb = fc.constantFrom(GATEWAY, GATEWAY, GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN);

export interface FuzzRequest {
  surface: string;
  method: string;
  path: string;
  body?: string;
  token: string;
  headers?: Record<string, string>;
  /** Session keys this request names that may not exist: those that did not must stay empty when it is rejected. */
  fresh: string[];
}

/**
 * Keys that may not exist yet, from a small pool (a new object per request would pile up thousands of
 * live objects in the test runtime). Which of them are really fresh is read just before the request.
 */
let freshCounter = 0;
export const freshKey = () => `agent:main:fz-pool-${++freshCounter % 24}`;

export function pathKey(k: string): string {
  return encodeURIComponent(wellFormed(k));
}

export function headerSafe(v: string): string | undefined {
  const s = v.trim();
  return /^[\x20-\x7e]*$/.test(s) && s.length < 2000 ? s : undefined;
}

/** A value that names a fresh session when it is the marker. */
export const FRESH = "$fresh";
export const keyOrFresh = fc.oneof({ weight: 3, arbitrary: keyArb }, { weight: 2, arbitrary: fc.constant(FRESH) });

export function resolveFresh(v: unknown, fresh: string[]): unknown {
  if (v === FRESH) {
    const k = freshKey();
    fresh.push(k);
    return k;
  }
  return v;
}

export const mcpJunk: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    tokenArb,
    fc.oneof(
      junk,
      objectOf({
        jsonrpc: field(fc.constant("2.0")),
        id: field(fc.integer()),
        method: field(fc.constantFrom("initialize", "ping", "tools/list", "tools/call", "nope")),
        params: junk,
      }),
      fc.array(
        objectOf({
          jsonrpc: fc.constant("2.0"),
          id: field(fc.integer()),
          method: field(fc.constantFrom("ping", "tools/list", "tools/call")),
          params: junk,
        }),
        { maxLength: 40 },
      ),
    ),
  )
  .map(([token, body]) => ({
    surface: "/mcp json-rpc",
    method: "POST",
    path: "/mcp",
    body: toJson(body),
    token,
    headers: { Accept: "application/json, text/event-stream" },
    fresh: [],
  }));

/** Bodies that are not JSON objects at all, or JSON that no serializer would write. */
export const rawBodies: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.constantFrom(
      "/tools/invoke",
      "/mcp",
      "/v1/sessions/agent%3Amain%3Afz-raw/messages",
      "/v1/sessions/agent%3Amain%3Afz-raw",
      "/v1/runs/x/complete",
    ),
    fc.constantFrom("POST", "PATCH"),
    fc.oneof(
      fc.constantFrom(
        "",
        "{",
        "}",
        "null",
        "[]",
        '"str"',
        "1e400",
        '{"limit":1e400}',
        '{"message":"x","threadId":1e400}',
        '{"tool":"sessions_list","args":{"limit":1e400}}',
        '{"tool":"sessions_list","args":{"activeMinutes":1e308}}',
        '{"tool":"sessions_spawn","args":{"task":"t","runTimeoutSeconds":1e308}}',
        '{"a":NaN}',
        "\u0000",
        '{"message":"\\u0000"}',
        "\ufeff{}",
        '{"__proto__":{"x":1}}',
      ),
      fc.string({ unit: "binary", maxLength: 60 }),
      deep.map((r) => r.text),
      deepObject.map((r) => r.text),
    ),
  )
  .map(([path, method, body]) => ({
    surface: `raw ${method} ${path.split("/")[1]}`,
    method:
      path === "/tools/invoke" || path === "/mcp" || path.endsWith("complete") || path.endsWith("messages")
        ? "POST"
        : method,
    path,
    body,
    token: GATEWAY,
    headers: { "Content-Type": "application/json" },
    fresh: [],
  }));

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authLimiter } from "../../src/http/rate-limit";
import { Contract, type Doc, GENERATED_ANSWERS, request } from "../helpers/contract";
import { quiesce } from "../helpers/quiesce";
import { type Schema, SchemaSet, SKIP } from "../helpers/schema-arbitrary";

/**
 * Requests generated from /openapi.json, for every operation it lists (docs/contract.md, "The OpenAPI
 * document"): the document must say exactly what the server accepts.
 *   - A request the document accepts (path parameters, query parameters and body generated from their schemas
 *     by test/helpers/schema-arbitrary.ts) is never a 400, but for the few refusals that depend on
 *     configuration or state rather than shape (SEMANTIC below).
 *   - A request breaking one documented constraint — a pattern, a length, a bound, an enum, a required field,
 *     `additionalProperties: false`, `minProperties`, `oneOf` — or carrying a query parameter the operation
 *     does not list (the document's rule: info.description) is a 4xx.
 * Every answer is also checked against the document (test/helpers/contract.ts). Calls to /tools/invoke carry
 * `dryRun: true`, a documented value: the tool's schema is applied and nothing runs (a generated
 * sessions_send could otherwise wait 15 minutes). Headers are not generated. The seed is fixed.
 */

const SEED = 250_025;
/** Valid requests per operation (per variant of a union body), and invalid ones per documented constraint. */
const VALID_RUNS = 12;
const PER_CONSTRAINT = 2;

/**
 * 400s that no schema can state: they depend on CONFIG or the session's state, not on the request's shape
 * (docs/contract.md). Every other 400 to a request the document accepts is a failure.
 */
const SEMANTIC: Record<string, RegExp> = {
  // Which models exist is configuration (docs/models.md); thinking levels and send policies are words read
  // case-insensitively and trimmed, as OpenClaw reads them (src/runners/thinking.ts, src/policy/send-policy.ts).
  "PATCH /v1/sessions/{key}": /^(invalid model: |thinkingLevel: Invalid thinking level|invalid sendPolicy)/,
  // A cursor is opaque: only one a listing page returned reads back.
  "GET /v1/sessions": /^cursor: not a cursor returned by a previous listing page$/,
};

type Op = { method: string; path: string; operation: Record<string, any> };
type Built = { method: string; path: string; query: [string, string][]; body?: unknown; label: string };

let contract: Contract;
let set: SchemaSet;
let ops: Op[] = [];
const problems: string[] = [];

beforeAll(async () => {
  const r = await request("GET", "/openapi.json", undefined, { token: null });
  contract = new Contract(r.json as Doc);
  set = new SchemaSet((r.json as Doc).components.schemas as Record<string, Schema>);
  ops = Object.entries((r.json as Doc).paths).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
  );
});

afterAll(async () => {
  await quiesce();
});

const paramsOf = (op: Op, where: string): Array<{ name: string; required?: boolean; schema: Schema }> =>
  (op.operation.parameters ?? []).filter((p: any) => p.in === where);
const bodySchemaOf = (op: Op): Schema | undefined => op.operation.requestBody?.content?.["application/json"]?.schema;

/** A query value as sent: a string, which the server reads as the documented type (integers from their digits). */
const queryString = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));
function queryAccepts(schema: Schema, raw: string): boolean {
  const numeric = schema.type === "integer" || schema.type === "number";
  if (numeric) return /^-?\d+$/.test(raw) && set.accepts(schema, Number(raw));
  return set.accepts(schema, raw);
}

/**
 * The parts of a request the document accepts, each an arbitrary (optional query parameters may be left
 * out); the body from one branch of its union (`branch`), so every /tools/invoke variant is exercised.
 */
function validParts(op: Op, branch?: Schema) {
  const path = fc.record(
    Object.fromEntries(paramsOf(op, "path").map((p) => [p.name, set.valueOf(p.schema)])),
  ) as fc.Arbitrary<Record<string, unknown>>;
  const query = fc.record(
    Object.fromEntries(
      paramsOf(op, "query").map((p) => [
        p.name,
        p.required ? set.valueOf(p.schema) : fc.option(set.valueOf(p.schema), { nil: undefined }),
      ]),
    ),
  ) as fc.Arbitrary<Record<string, unknown>>;
  const schema = bodySchemaOf(op);
  const body = schema ? set.valueOf(schema, branch) : fc.constant(undefined);
  return { path, query, body };
}

/** A path parameter is a non-empty segment that no URL normalises away (RFC 3986 dot segments). */
const segmentValue = (v: unknown) => v !== "" && v !== "." && v !== "..";

function build(
  op: Op,
  parts: { path: Record<string, unknown>; query: Record<string, unknown>; body: unknown },
  label: string,
): Built | undefined {
  const values = [...Object.values(parts.path), ...Object.values(parts.query), parts.body];
  if (values.includes(SKIP) || !Object.values(parts.path).every(segmentValue)) return undefined;
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name) => encodeURIComponent(String(parts.path[name])));
  const query = Object.entries(parts.query)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => [k, queryString(v)] as [string, string]);
  let body = parts.body;
  // Tool calls are checked, not run (see above); a body whose dryRun is itself the broken field keeps it.
  const isObject = typeof body === "object" && body !== null && !Array.isArray(body);
  if (op.path === "/tools/invoke" && isObject && [undefined, true, false].includes((body as any).dryRun))
    body = { ...(body as object), dryRun: true };
  return { method: op.method, path, query, body, label };
}

type Breaking = { label: string; what: string; requests: fc.Arbitrary<Built | undefined> };

/**
 * For each documented constraint of the operation, requests that break it and nothing else (the rest of the
 * request valid). Path and query values travel as text: a violation is one whose text the schema refuses.
 */
function breakingRequests(op: Op): Breaking[] {
  const valid = fc.record(validParts(op));
  const out: Breaking[] = [];
  for (const p of paramsOf(op, "path"))
    for (const v of set.violationsOf(p.schema, p.name))
      out.push({
        label: `path ${v.at} ${v.what}`,
        what: v.what,
        requests: fc.tuple(valid, v.arb).map(([parts, x]) => {
          if (typeof x !== "string" || set.accepts(p.schema, x)) return undefined;
          return build(op, { ...parts, path: { ...parts.path, [p.name]: x } }, `path ${v.at} ${v.what}`);
        }),
      });
  for (const p of paramsOf(op, "query"))
    for (const v of set.violationsOf(p.schema, p.name))
      out.push({
        label: `query ${v.at} ${v.what}`,
        what: v.what,
        requests: fc.tuple(valid, v.arb).map(([parts, x]) => {
          if (x === SKIP || typeof x === "object" || queryAccepts(p.schema, queryString(x))) return undefined;
          return build(op, { ...parts, query: { ...parts.query, [p.name]: x } }, `query ${v.at} ${v.what}`);
        }),
      });
  // Any name the operation does not list: refused, as bodies refuse unknown fields — where errors are the
  // envelope; a protocol endpoint answering its own errors (/mcp: JSON-RPC) keeps its protocol's rules.
  const listed = new Set(paramsOf(op, "query").map((p) => p.name));
  const envelope = op.operation.responses?.["400"]?.content?.["application/json"]?.schema?.$ref?.endsWith("/Error");
  if (envelope)
    out.push({
      label: "unknown query parameter",
      what: "unknown query parameter",
      requests: fc
        .tuple(valid, fc.stringMatching(/^[a-z][A-Za-z_]{1,12}$/), fc.constantFrom("1", "", "true"))
        .map(([parts, name, value]) =>
          listed.has(name)
            ? undefined
            : build(op, { ...parts, query: { ...parts.query, [name]: value } }, `unknown query parameter ${name}`),
        ),
    });
  const schema = bodySchemaOf(op);
  for (const v of schema ? set.violationsOf(schema, "body") : [])
    out.push({
      label: `${v.at} ${v.what}`,
      what: v.what,
      requests: fc.tuple(valid, v.arb).map(([parts, x]) => build(op, { ...parts, body: x }, `${v.at} ${v.what}`)),
    });
  return out;
}

async function send(op: Op, r: Built) {
  const search = r.query.length ? `?${new URLSearchParams(r.query).toString()}` : "";
  const answer = await request(r.method, `${r.path}${search}`, r.body);
  try {
    contract.check(`${op.method} ${op.path}`, answer);
  } catch (err) {
    problems.push(`undocumented answer to ${shown(r)}: ${err instanceof Error ? err.message.slice(0, 400) : err}`);
  }
  return answer;
}

const shown = (r: Built) =>
  `${r.method} ${r.path.slice(0, 160)}${r.query.length ? `?${new URLSearchParams(r.query)}`.slice(0, 200) : ""}${r.body === undefined ? "" : ` ${JSON.stringify(r.body).slice(0, 300)}`}`;

function samples<T>(arb: fc.Arbitrary<T | undefined>, n: number, seed: number): T[] {
  return fc
    .sample(arb, { numRuns: n * 3, seed })
    .filter((x): x is T => x !== undefined)
    .slice(0, n);
}

describe("requests generated from /openapi.json", () => {
  it("a request the document accepts is never refused as malformed", async () => {
    let sent = 0;
    for (const [i, op] of ops.entries()) {
      const schema = bodySchemaOf(op);
      for (const [j, branch] of (schema ? set.branchesOf(schema) : [undefined]).entries()) {
        const arb = fc.record(validParts(op, branch)).map((parts) => build(op, parts, "valid"));
        const requests = samples(arb, VALID_RUNS, SEED + i * 100 + j);
        expect(requests.length, `${op.method} ${op.path} (${j}): valid requests generated`).toBeGreaterThan(
          VALID_RUNS / 2,
        );
        for (const r of requests) {
          const a = await send(op, r);
          if (++sent % 100 === 0) authLimiter.reset();
          const message = String(a.json?.error?.message ?? "");
          if (a.status === 400 && !SEMANTIC[`${op.method} ${op.path}`]?.test(message))
            problems.push(`valid request refused: ${shown(r)} → 400 ${message}`);
          if (a.status >= 500) problems.push(`valid request failed: ${shown(r)} → ${a.status} ${a.text.slice(0, 200)}`);
        }
      }
    }
    console.log(`[openapi-requests] ${sent} valid requests over ${ops.length} operations`);
    expect(problems).toEqual([]);
  }, 300_000);

  it("a request breaking one documented constraint is a 4xx, for every constraint the document states", async () => {
    let sent = 0;
    const found: string[] = [];
    const kinds = new Set<string>();
    for (const [i, op] of ops.entries()) {
      for (const [j, breaking] of breakingRequests(op).entries()) {
        const requests = samples(breaking.requests, PER_CONSTRAINT, SEED + 1000 + i * 1000 + j);
        if (requests.length) kinds.add(breaking.what.replace(/^required .*/, "required"));
        for (const r of requests) {
          const a = await send(op, r);
          if (++sent % 100 === 0) authLimiter.reset();
          if (a.status < 400 || a.status >= 500)
            found.push(`${r.label} accepted: ${shown(r)} → ${a.status} ${a.text.slice(0, 160)}`);
        }
      }
    }
    console.log(`[openapi-requests] ${sent} invalid requests over ${ops.length} operations`);
    expect([...found, ...problems]).toEqual([]);
    // The constraints the document uses were each broken at least once (a generator that lost one fails here).
    const documented = ["pattern", "maxLength", "minimum", "const/enum", "required", "additionalProperties"];
    for (const kind of [...documented, "minProperties", "oneOf (all)", "oneOf (none)", "unknown query parameter"])
      expect([...kinds], kind).toContain(kind);
    expect(GENERATED_ANSWERS.filter((answer) => !contract.seen.has(answer))).toEqual([]);
  }, 300_000);
});

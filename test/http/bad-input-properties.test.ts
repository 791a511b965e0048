import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { authLimiter } from "../../src/http/rate-limit";
import worker from "../../src/index";
import { TOOLS } from "../../src/tools/registry";
import { GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "../helpers/http";

/**
 * Property-based bad input (docs/limits.md: bad input gets a clear 4xx and changes nothing): for every
 * tool over /tools/invoke and /mcp and every /v1 route, fast-check generates values of every field —
 * wrong types, boundary and non-finite numbers (sent as raw JSON such as `1e400`, which
 * JSON.stringify cannot produce), huge and unicode strings, NUL and control characters,
 * deep nesting, huge arrays, unknown fields — and checks each answer:
 *   - 2xx, or 4xx with the error envelope (JSON-RPC's error object on /mcp) — never a 5xx;
 *   - a rejected request stored nothing: the session keys it named fresh have no storage and no
 *     registry shard grew.
 * The seed is fixed and printed with the number of requests and findings.
 */
const SEED = 902_026;
const runs = (n: number) => n;
/** Lone surrogates replaced: URLs and header values cannot carry them (JSON bodies still do, escaped). */
const wellFormed = (s: string) =>
  s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

// ---------------------------------------------------------------- raw JSON

/** A JSON token written verbatim (non-finite and out-of-range numbers, deep nesting). */
class Raw {
  constructor(readonly text: string) {}
  toString() {
    return `Raw(${this.text.length > 40 ? `${this.text.slice(0, 40)}…` : this.text})`;
  }
}

function toJson(v: unknown): string {
  if (v instanceof Raw) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

// ---------------------------------------------------------------- generators

const KEYS_VALID = [
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
const KEYS_BAD = [
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

const numbersRaw = fc.constantFrom(
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
const numbers = fc.oneof(
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
const controlString = fc
  .array(fc.integer({ min: 0, max: 0x1f }), { maxLength: 12 })
  .map((cs) => String.fromCharCode(...cs));
const strings = fc.oneof(
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
const deep = fc.integer({ min: 50, max: 3000 }).map((d) => new Raw("[".repeat(d) + "]".repeat(d)));
const deepObject = fc.integer({ min: 50, max: 1500 }).map((d) => new Raw(`${'{"a":'.repeat(d)}1${"}".repeat(d)}`));
const leaf = fc.oneof(fc.constantFrom(null, true, false), numbers, strings);
const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  { weight: 2, arbitrary: fc.array(leaf, { maxLength: 5 }) },
  { weight: 2, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), leaf, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(5_000, 60_000).map((n) => new Array(n).fill("group")) },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: deepObject },
);

/** A field's plausible values (the mutation below supplies the junk). */
const field = (plausible: fc.Arbitrary<unknown>) => plausible;
const keyArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...KEYS_VALID) },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS_BAD) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
);
/** Mostly null: an optional extra that is present now and then. */
const rarely = <T>(a: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: a });
const unknownFields = fc.dictionary(
  fc.string({ maxLength: 12 }).filter((k) => !/^[a-z]/i.test(k) || k.length > 10),
  junk,
  { maxKeys: 2 },
);

/**
 * An object of plausible fields (each present or not) with, most of the time, exactly one field — known or
 * unknown — replaced by junk: so a request gets past the other checks and the bad value reaches deep code.
 */
function objectOf(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
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

const TOOL_ARGS: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  sessions_list: objectOf({
    kinds: field(
      fc.array(fc.constantFrom("main", "group", "cron", "hook", "node", "other", "GROUP", "bogus"), { maxLength: 8 }),
    ),
    limit: field(fc.integer({ min: 1, max: 10 })),
    activeMinutes: field(fc.integer({ min: 1, max: 100_000 })),
    messageLimit: field(fc.integer({ min: 0, max: 3 })),
    cursor: field(
      fc.constantFrom(
        "WzEsImEiXQ",
        btoa(JSON.stringify([Number.POSITIVE_INFINITY, "x"])),
        "WzFlNDAwLCJ4Il0",
        btoa("[1,2]"),
      ),
    ),
  }),
  sessions_history: objectOf({
    sessionKey: field(keyArb),
    limit: field(fc.integer({ min: 1, max: 50 })),
    includeTools: field(fc.boolean()),
    before: field(fc.integer({ min: 1, max: 1000 })),
    messageId: field(fc.constantFrom("1", "2", "x", "999999", "0")),
  }),
  sessions_search: objectOf({
    query: field(fc.string({ maxLength: 40 })),
    sessionKey: field(keyArb),
    limit: field(fc.integer({ min: 0, max: 30 })),
  }),
  sessions_send: objectOf({
    sessionKey: field(keyArb),
    label: field(fc.constantFrom("lbl", "none")),
    agentId: field(fc.constantFrom("main", "research", "nope", "Main")),
    message: field(fc.string({ maxLength: 40 })),
    timeoutSeconds: field(fc.constantFrom(0, 0, 1, 1e308)),
    idempotencyKey: field(fc.string({ minLength: 1, maxLength: 20 })),
  }),
  sessions_spawn: objectOf({
    task: field(fc.string({ maxLength: 40 })),
    label: field(fc.string({ maxLength: 20 })),
    agentId: field(fc.constantFrom("main", "research", "nope", "BAD ID")),
    model: field(fc.constantFrom("builtin/echo", "nope/x", "builtin/nothing")),
    thinking: field(fc.constantFrom("low", "high", "max")),
    runTimeoutSeconds: field(fc.constantFrom(0, 1, 60, 1e9, 1e308)),
    timeoutSeconds: field(fc.constantFrom(0, 30, 1e308)),
    thread: field(fc.boolean()),
    mode: field(fc.constantFrom("run", "session")),
    cleanup: field(fc.constantFrom("delete", "keep")),
    sandbox: field(fc.constantFrom("inherit", "require")),
    attachments: field(
      fc.array(
        objectOf({
          name: field(fc.constantFrom("a.txt", "../x", "", ".manifest.json")),
          content: field(fc.constantFrom("hello", "aGVsbG8=", "!!")),
          encoding: field(fc.constantFrom("utf8", "base64")),
          mimeType: field(fc.constantFrom("text/plain")),
        }),
        { maxLength: 3 },
      ),
    ),
    attachAs: field(objectOf({ mountPath: field(fc.constantFrom("/data", "../..")) })),
  }),
  agents_list: objectOf({}),
};
const TOOL_NAMES = Object.keys(TOOL_ARGS);
const tokenArb = fc.constantFrom(GATEWAY, GATEWAY, GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN);

// ---------------------------------------------------------------- requests

interface FuzzRequest {
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
const freshKey = () => `agent:main:fz-pool-${++freshCounter % 24}`;

function pathKey(k: string): string {
  return encodeURIComponent(wellFormed(k));
}

function headerSafe(v: string): string | undefined {
  const s = v.trim();
  return /^[\x20-\x7e]*$/.test(s) && s.length < 2000 ? s : undefined;
}

/** A value that names a fresh session when it is the marker. */
const FRESH = "$fresh";
const keyOrFresh = fc.oneof({ weight: 3, arbitrary: keyArb }, { weight: 2, arbitrary: fc.constant(FRESH) });

function resolveFresh(v: unknown, fresh: string[]): unknown {
  if (v === FRESH) {
    const k = freshKey();
    fresh.push(k);
    return k;
  }
  return v;
}

const toolsInvoke: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.constantFrom(...TOOL_NAMES),
    tokenArb,
    fc.boolean(),
    keyOrFresh,
    fc.nat(9).map((n) => n === 0),
    rarely(junk),
    fc.option(fc.boolean()),
  )
  .chain(([tool, token, freshRequester, requester, argsAreJunk, topJunk, dryRun]) =>
    (argsAreJunk ? junk : TOOL_ARGS[tool]).map((args) => {
      const fresh: string[] = [];
      const a =
        args && typeof args === "object" && !Array.isArray(args) && !(args instanceof Raw)
          ? { ...(args as Record<string, unknown>) }
          : args;
      if (a && typeof a === "object" && !(a instanceof Raw) && "sessionKey" in a)
        (a as Record<string, unknown>).sessionKey = resolveFresh((a as Record<string, unknown>).sessionKey, fresh);
      const sessionKey = freshRequester
        ? resolveFresh(FRESH, fresh)
        : requester === FRESH
          ? resolveFresh(FRESH, fresh)
          : requester;
      const body: Record<string, unknown> = { tool, args: a, sessionKey };
      if (topJunk !== null) body.action = topJunk;
      if (dryRun !== null) body.dryRun = dryRun;
      return {
        surface: `/tools/invoke ${tool}`,
        method: "POST",
        path: "/tools/invoke",
        body: toJson(body),
        token,
        fresh,
      };
    }),
  );

const mcpCall: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.constantFrom(...TOOL_NAMES),
    tokenArb,
    fc.nat(9).map((n) => n === 0),
    rarely(keyArb),
  )
  .chain(([tool, token, argsAreJunk, header]) =>
    (argsAreJunk ? junk : TOOL_ARGS[tool]).map((args) => {
      const fresh: string[] = [];
      const requester = freshKey();
      fresh.push(requester);
      const h = header !== null ? headerSafe(header) : undefined;
      const msg = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: args } };
      return {
        surface: `/mcp ${tool}`,
        method: "POST",
        path: "/mcp",
        body: toJson(msg),
        token,
        headers: { Accept: "application/json, text/event-stream", "X-Session-Key": h ?? requester },
        fresh: h ? [] : fresh,
      };
    }),
  );

const mcpJunk: fc.Arbitrary<FuzzRequest> = fc
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

const queryJunk = fc.oneof(
  strings.filter((s) => s.length < 3000),
  fc.constantFrom("1e400", "-1", "0", "NaN", "Infinity", "99999999999999999999999", "1.5", "", "group,".repeat(200)),
  fc.integer().map(String),
);
/** Plausible values per query parameter; as with bodies, most queries carry exactly one junk value. */
const QUERY_PLAUSIBLE: Record<string, fc.Arbitrary<string>> = {
  agentId: fc.constantFrom("main", "research", "nope"),
  limit: fc.integer({ min: 1, max: 20 }).map(String),
  kinds: fc.constantFrom("main", "group,cron", "other", "bogus"),
  activeMinutes: fc.integer({ min: 1, max: 10_000 }).map(String),
  cursor: fc.constantFrom("WzEsImEiXQ", "WzFlNDAwLCJ4Il0"),
  before: fc.integer({ min: 1, max: 50 }).map(String),
  includeTools: fc.constantFrom("true", "false"),
  status: fc.constantFrom("pending", "delivered", "blocked", "dead"),
  timeoutMs: fc.integer({ min: 0, max: 50 }).map(String),
};
function query(names: string[]): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.record(Object.fromEntries(names.map((n) => [n, QUERY_PLAUSIBLE[n]])), { requiredKeys: [] }),
      fc.option(fc.constantFrom(...names)),
      queryJunk,
    )
    .map(([q, mutated, bad]) => {
      const s = new URLSearchParams();
      for (const [k, v] of Object.entries(q)) s.set(k, v as string);
      if (mutated !== null) s.set(mutated, wellFormed(bad));
      const t = s.toString();
      return t ? `?${t}` : "";
    });
}

const messageBody = objectOf({
  message: field(fc.string({ minLength: 1, maxLength: 30 })),
  channel: field(fc.constantFrom("telegram", "webchat")),
  to: field(fc.string({ maxLength: 10 })),
  accountId: field(fc.string({ maxLength: 10 })),
  threadId: field(fc.oneof(fc.integer(), fc.string({ maxLength: 10 }))),
  chatType: field(fc.constantFrom("direct", "group", "channel")),
  displayName: field(fc.string({ maxLength: 10 })),
  deliver: field(fc.boolean()),
  idempotencyKey: field(fc.string({ minLength: 1, maxLength: 10 })),
  senderIsOwner: field(fc.boolean()),
});
const patchBody = objectOf({
  label: field(fc.string({ maxLength: 20 })),
  model: field(fc.constantFrom("builtin/echo", "nope/x", null)),
  thinkingLevel: field(fc.constantFrom("high", null)),
  verboseLevel: field(fc.constantFrom("on", null)),
  sendPolicy: field(fc.constantFrom("allow", "deny", "DENY", null, "maybe")),
});
const completeBody = objectOf({
  reply: field(fc.string({ maxLength: 20 })),
  error: field(fc.string({ maxLength: 20 })),
  usage: field(objectOf({ input: field(fc.nat()), output: field(fc.nat()) })),
  model: field(fc.string({ maxLength: 10 })),
});
const runIdArb = fc.oneof(
  fc.constantFrom("run-1", "", "x".repeat(3000), "agent%3Amain%3Amain.abc"),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.constant("$seedRun"),
);

let seedRunId = "";
const runPath = (id: string) => encodeURIComponent(wellFormed(id === "$seedRun" ? seedRunId : id) || "-");

const v1: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc.tuple(keyOrFresh, messageBody, tokenArb).map(([k, b, token]) => {
    const fresh: string[] = [];
    const key = resolveFresh(k, fresh) as string;
    return {
      surface: "POST /v1/sessions/:key/messages",
      method: "POST",
      path: `/v1/sessions/${pathKey(key)}/messages`,
      body: toJson(b),
      token,
      fresh,
    };
  }),
  fc.tuple(keyOrFresh, fc.oneof(patchBody, junk), tokenArb).map(([k, b, token]) => {
    const fresh: string[] = [];
    const key = resolveFresh(k, fresh) as string;
    return {
      surface: "PATCH /v1/sessions/:key",
      method: "PATCH",
      path: `/v1/sessions/${pathKey(key)}`,
      body: toJson(b),
      token,
      fresh,
    };
  }),
  fc.tuple(fc.oneof(fc.constant(FRESH), fc.constantFrom(...KEYS_BAD)), tokenArb).map(([k, token]) => {
    const fresh: string[] = [];
    const key = resolveFresh(k, fresh) as string;
    return {
      surface: "DELETE /v1/sessions/:key",
      method: "DELETE",
      path: `/v1/sessions/${pathKey(key)}`,
      token,
      fresh,
    };
  }),
  fc
    .tuple(query(["agentId", "limit", "kinds", "activeMinutes", "cursor"]), tokenArb)
    .map(([q, token]) => ({ surface: "GET /v1/sessions", method: "GET", path: `/v1/sessions${q}`, token, fresh: [] })),
  fc
    .tuple(
      keyOrFresh,
      fc.constantFrom(
        "",
        "/history",
        "/transcript.jsonl",
        "/deliveries",
        "/attachments",
        "/attachments/a.txt",
        "/timers/dead",
      ),
      query(["limit", "before", "includeTools", "status"]),
      tokenArb,
    )
    .map(([k, sub, q, token]) => {
      const fresh: string[] = [];
      const key = resolveFresh(k, fresh) as string;
      return {
        surface: `GET /v1/sessions/:key${sub}`,
        method: "GET",
        path: `/v1/sessions/${pathKey(key)}${sub}${q}`,
        token,
        fresh,
      };
    }),
  fc
    .tuple(
      keyOrFresh,
      fc.string({ unit: "binary", maxLength: 30 }),
      fc.constantFrom("deliveries", "timers/dead/outbox"),
      tokenArb,
    )
    .map(([k, id, what, token]) => {
      const fresh: string[] = [];
      const key = resolveFresh(k, fresh) as string;
      return {
        surface: `POST /v1/sessions/:key/${what}/:id/retry`,
        method: "POST",
        path: `/v1/sessions/${pathKey(key)}/${what}/${encodeURIComponent(wellFormed(id) || "-")}/retry`,
        token,
        fresh,
      };
    }),
  fc
    .tuple(
      runIdArb,
      fc.constantFrom("", "/wait", "/abort", "/complete"),
      query(["timeoutMs"]),
      fc.option(completeBody),
      tokenArb,
    )
    .map(([id, sub, q, b, token]) => ({
      surface: `${sub === "" || sub === "/wait" ? "GET" : "POST"} /v1/runs/:id${sub}`,
      method: sub === "" || sub === "/wait" ? "GET" : "POST",
      path: `/v1/runs/${runPath(id)}${sub}${sub === "/wait" ? q : ""}`,
      body: sub === "/complete" && b !== null ? toJson(b) : undefined,
      token,
      fresh: [],
    })),
  fc.tuple(fc.constantFrom("/v1/tools", "/v1/agents"), fc.option(keyArb), tokenArb).map(([path, h, token]) => {
    const hv = h !== null ? headerSafe(h) : undefined;
    return {
      surface: `GET ${path}`,
      method: "GET",
      path,
      token,
      headers: hv !== undefined ? { "X-Session-Key": hv } : undefined,
      fresh: [],
    };
  }),
);

/** Bodies that are not JSON objects at all, or JSON that no serializer would write. */
const rawBodies: fc.Arbitrary<FuzzRequest> = fc
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

// ---------------------------------------------------------------- the check

interface Finding {
  surface: string;
  problem: string;
  request: string;
}
const findings: Finding[] = [];
let tried = 0;
const bySurface = new Map<string, { n: number; statuses: Map<number, number> }>();

async function registryTotal(): Promise<number> {
  const [a, b] = await Promise.all([
    env.REGISTRY.getByName("registry:main").count(),
    env.REGISTRY.getByName("registry:research").count(),
  ]);
  return a + b;
}

function describeRequest(r: FuzzRequest): string {
  const body =
    r.body === undefined
      ? ""
      : ` ${r.body.length > 300 ? `${r.body.slice(0, 300)}… (${r.body.length} chars)` : r.body}`;
  return `${r.method} ${r.path.length > 200 ? `${r.path.slice(0, 200)}…` : r.path}${body}`;
}

async function check(r: FuzzRequest): Promise<boolean> {
  tried++;
  if (tried % 200 === 0) authLimiter.reset();
  const before = await registryTotal();
  const metas = await Promise.all(r.fresh.map((k) => env.SESSIONS.getByName(k).getMeta()));
  const fresh = r.fresh.filter((_, i) => metas[i] === null);
  const headers: Record<string, string> = { Authorization: `Bearer ${r.token}`, ...(r.headers ?? {}) };
  if (r.body !== undefined && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
  const t0 = Date.now();
  const watchdog = setTimeout(() => console.log(`[fuzz] still waiting after 5 s: ${describeRequest(r)}`), 5000);
  // The Worker's fetch handler is called directly: the test runtime's SELF.fetch slows down with every
  // request it has served (a 100th request costs ~2 ms, a 400th ~50 ms), which would cap a run at a few hundred inputs.
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`https://switchboard.test${r.path}`, { method: r.method, headers, body: r.body }),
    env as Env,
    ctx,
  );
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  clearTimeout(watchdog);
  if (Date.now() - t0 > 2000) console.log(`[fuzz] slow (${Date.now() - t0} ms): ${describeRequest(r)}`);
  const s = bySurface.get(r.surface) ?? { n: 0, statuses: new Map() };
  s.n++;
  s.statuses.set(res.status, (s.statuses.get(res.status) ?? 0) + 1);
  bySurface.set(r.surface, s);
  // Recorded, not thrown: every generated request runs, so one finding does not hide the next.
  const found = (problem: string) => {
    findings.push({ surface: r.surface, problem, request: describeRequest(r) });
    return true;
  };
  if (res.status < 300 && r.surface.endsWith("sessions_spawn")) {
    // An accepted spawn: its child's run timeout and timers are real times, never Infinity or years away.
    const child = /"childSessionKey":"([^"]+)"/.exec(text)?.[1];
    if (child && text.includes('"status":"accepted"')) {
      const timeout = (await env.SESSIONS.getByName(child).getMeta())?.subagent?.runTimeoutSeconds ?? 0;
      if (!Number.isFinite(timeout) || timeout > 31 * 24 * 3600)
        return found(`accepted spawn with runTimeoutSeconds ${timeout}`);
      const dues = await runInDurableObject(env.SESSIONS.getByName(child), (_o, state) =>
        state.storage.sql.exec<{ kind: string; due_at: number }>("SELECT kind, due_at FROM timers").toArray(),
      );
      const far = dues.find((t) => !Number.isFinite(t.due_at) || t.due_at > Date.now() + 31 * 24 * 3600_000);
      if (far) return found(`accepted spawn with a ${far.kind} timer due at ${far.due_at}`);
    }
  }
  if (res.status >= 500 || res.status < 200 || (res.status >= 300 && res.status < 400))
    return found(`HTTP ${res.status}: ${text.slice(0, 300)}`);
  if (res.status >= 400) {
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      return found(`HTTP ${res.status} without a JSON body: ${text.slice(0, 200)}`);
    }
    const envelope =
      json?.ok === false && typeof json.error?.type === "string" && typeof json.error?.message === "string";
    const jsonRpc =
      r.path === "/mcp" &&
      json?.jsonrpc === "2.0" &&
      typeof json.error?.code === "number" &&
      typeof json.error?.message === "string";
    if (!envelope && !jsonRpc) return found(`HTTP ${res.status} without the error envelope: ${text.slice(0, 200)}`);
    const after = await registryTotal();
    if (after > before) return found(`rejected (HTTP ${res.status}) but the registry grew from ${before} to ${after}`);
    for (const k of fresh) {
      if ((await env.SESSIONS.getByName(k).getMeta()) !== null)
        return found(`rejected (HTTP ${res.status}) but session ${k} was created`);
    }
  }
  return true;
}

async function explore(name: string, arb: fc.Arbitrary<FuzzRequest>, numRuns: number): Promise<void> {
  const details = await fc.check(fc.asyncProperty(arb, check), { seed: SEED, numRuns });
  // Only an exception inside the check itself (a broken client request) fails the property.
  if (details.failed)
    console.log(`[fuzz] ${name}: the check threw after ${details.numRuns} runs: ${String(details.errorInstance)}`);
  expect(details.failed).toBe(false);
}

/** The fuzzed gateway's configuration and its channel webhooks (answered here); reset after every test (test/setup.ts). */
function fuzzWorld(): void {
  setConfigOverride({
    agents: {
      defaults: { subagents: { allowAgents: ["*"], maxSpawnDepth: 2, archiveAfterMinutes: 0 } },
      list: [{ id: "main", default: true }, { id: "research" }],
    },
    tools: {
      sessions: { visibility: "all" },
      agentToAgent: { enabled: true },
      sessions_spawn: { attachments: { enabled: true } },
    },
    session: { agentToAgent: { maxPingPongTurns: 0 } },
    channels: {
      telegram: { outbound: { url: "https://hooks.fuzz/telegram" }, threadBindings: true },
      webchat: { webhookUrl: "https://hooks.fuzz/webchat" },
    },
  });
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.startsWith("https://hooks.fuzz/")) return new Response("ok");
    return realFetch(input, init);
  });
}

beforeAll(async () => {
  fuzzWorld();
  const seeded = await sendAndWait("agent:main:fz-seed", "seed message");
  seedRunId = seeded.runId;
});
beforeEach(fuzzWorld);

describe("bad input, generated: never a 5xx, always the envelope, nothing stored when refused", () => {
  it("generates arguments for every tool of the registry (a new tool needs its entry in TOOL_ARGS)", () => {
    expect([...TOOL_NAMES].sort()).toEqual(TOOLS.map((t) => t.name).sort());
  });

  it("every tool over /tools/invoke and /mcp, every /v1 route, raw bodies", { timeout: 300_000 }, async () => {
    const started = Date.now();
    await explore("/tools/invoke", toolsInvoke, runs(800));
    await explore("/mcp tools/call", mcpCall, runs(350));
    await explore("/mcp json-rpc", mcpJunk, runs(150));
    await explore("/v1", v1, runs(800));
    await explore("raw bodies", rawBodies, runs(200));
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(
      `[fuzz] seed ${SEED}: ${tried} generated requests in ${seconds}s over ${bySurface.size} surfaces; ${findings.length} finding(s)`,
    );
    for (const [surface, s] of [...bySurface].sort())
      console.log(
        `[fuzz]   ${surface}: ${s.n} (${[...s.statuses]
          .sort((a, b) => a[0] - b[0])
          .map(([st, n]) => `${st}×${n}`)
          .join(" ")})`,
      );
    for (const f of findings.slice(0, 20)) console.log(`[fuzz] FOUND ${f.surface}: ${f.problem}\n        ${f.request}`);
    expect(tried).toBeGreaterThanOrEqual(runs(2000));
    expect(findings).toEqual([]);
  });
});

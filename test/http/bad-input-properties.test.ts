import fc from "fast-check";
import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { TOOLS } from "../../src/tools/registry";
import { explore, findings, report, triedSoFar } from "../helpers/fuzz-check";
import {
  FRESH,
  type FuzzRequest,
  field,
  freshKey,
  headerSafe,
  junk,
  KEYS_BAD,
  keyArb,
  keyOrFresh,
  mcpJunk,
  objectOf,
  pathKey,
  Raw,
  rarely,
  rawBodies,
  resolveFresh,
  strings,
  toJson,
  tokenArb,
  wellFormed,
} from "../helpers/fuzz-values";
import { sendAndWait } from "../helpers/http";

/**
 * Property-based bad input (docs/limits.md: bad input gets a clear 4xx and changes nothing): for every
 * tool over /tools/invoke and /mcp and every /v1 route, fast-check generates values of every field —
 * wrong types, boundary and non-finite numbers (sent as raw JSON such as `1e400`, which
 * JSON.stringify cannot produce), huge and unicode strings, NUL and control characters,
 * deep nesting, huge arrays, unknown fields — and checks each answer:
 *   - 2xx, or 4xx with the error envelope (JSON-RPC's error object on /mcp) — never a 5xx;
 *   - a rejected request stored nothing: the session keys it named fresh have no storage and no
 *     registry shard grew.
 * The seed is fixed and printed with the number of requests and findings. The values and the generic
 * requests are test/helpers/fuzz-values.ts, the check test/helpers/fuzz-check.ts; here are what each tool
 * and route takes.
 */
const SEED = 902_026;
const runs = (n: number) => n;

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
    mode: field(fc.constantFrom("steer", "followup", "notify", "resume", "bogus")),
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
  session_status: objectOf({
    sessionKey: field(keyArb),
    model: field(fc.constantFrom("builtin/echo", "nope/x", "default", "", "DEFAULT")),
    changesSince: field(fc.constantFrom(0, 1, 200, -1, 1.5, 1e308)),
  }),
  sessions_yield: objectOf({
    message: field(fc.string({ maxLength: 40 })),
    acknowledgment: field(fc.string({ maxLength: 20 })),
    waitFor: field(fc.constantFrom("message", "children", "")),
  }),
  subagents: objectOf({
    action: field(fc.constantFrom("list", "wait", "cancel", "steer", "LIST")),
    recentMinutes: field(fc.constantFrom(0, 1, 30, 1440, 1e9, 1.5)),
    taskIds: field(
      fc.array(fc.constantFrom("", "x", "not.a-task", "00000000-0000-4000-8000-000000000000.YWdlbnQ6bWFpbjptYWlu"), {
        maxLength: 40,
      }),
    ),
    timeoutSeconds: field(fc.constantFrom(0, 0, 61, -1, 1e308)),
    taskId: field(fc.constantFrom("", "x", "00000000-0000-4000-8000-000000000000.YWdlbnQ6bWFpbjptYWlu")),
  }),
};
const TOOL_NAMES = Object.keys(TOOL_ARGS);

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
    await explore("/tools/invoke", toolsInvoke, runs(800), SEED);
    await explore("/mcp tools/call", mcpCall, runs(350), SEED);
    await explore("/mcp json-rpc", mcpJunk, runs(150), SEED);
    await explore("/v1", v1, runs(800), SEED);
    await explore("raw bodies", rawBodies, runs(200), SEED);
    report(SEED, Date.now() - started);
    expect(triedSoFar()).toBeGreaterThanOrEqual(runs(2000));
    expect(findings).toEqual([]);
  });
});

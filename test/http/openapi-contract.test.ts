import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { authLimiter } from "../../src/http/rate-limit";
import { beginClosing } from "../../src/session/closing";
import { SessionObject } from "../../src/session/session-object";
import { type Answer, Contract, type Doc, ownedElsewhere, request } from "../helpers/contract";
import { enc, MAIN_TOKEN, RESEARCH_TOKEN } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";

/**
 * Every route of /openapi.json, driven for real: each success answer and each documented error status
 * is produced at least once and its body validated against the documented schema. The last test fails
 * on any documented answer no request produced, and on any answer a route gives that is not documented.
 */

let contract: Contract;
const check = (op: string, a: Answer | Promise<Answer>) => Promise.resolve(a).then((x) => contract.check(op, x));

const KEY = `agent:main:contract-${crypto.randomUUID().slice(0, 8)}`;
const OTHER = `agent:main:contract-del-${crypto.randomUUID().slice(0, 8)}`;
const DELIVERY_ID = `d-${crypto.randomUUID()}`;
let runId = "";
/** Routes that only need to exist get any task id (the ledger's routes: test/http/openapi-contract-tasks.test.ts). */
const taskId = "no-such-task";

/** Path values of each template parameter, for requests that only need the route to exist. */
const fill = (path: string) =>
  path
    .replace("{key}", enc(KEY))
    .replace("{id}", path.startsWith("/v1/runs") ? runId : DELIVERY_ID)
    .replace("{kind}", "a2a")
    .replace("{ref}", "contract")
    .replace("{name}", "notes.txt")
    .replace("{taskId}", taskId);

const bodyOf = (method: string) => (method === "POST" || method === "PATCH" ? {} : undefined);

beforeAll(async () => {
  const r = await request("GET", "/openapi.json", undefined, { token: null });
  contract = new Contract(r.json as Doc);
  contract.check("GET /openapi.json", r);
});

afterEach(() => {
  authLimiter.reset();
});

describe("responses match /openapi.json", () => {
  it("sessions: message, list, row, patch, history, transcript, delete", async () => {
    const sent = await check(
      "POST /v1/sessions/{key}/messages",
      request("POST", `/v1/sessions/${enc(KEY)}/messages`, {
        message: "hello",
        channel: "telegram",
        to: "42",
        deliver: false,
      }),
    );
    expect(sent.status).toBe(202);
    runId = sent.json.runId;
    expect((await check("GET /v1/runs/{id}/wait", request("GET", `/v1/runs/${runId}/wait`))).json.status).toBe("ok");
    await check("GET /v1/runs/{id}", request("GET", `/v1/runs/${runId}`));
    await check("POST /v1/runs/{id}/abort", request("POST", `/v1/runs/${runId}/abort`));
    // Event streams: the contract is their status and Content-Type (docs/events.md; the bodies: test/events-*.test.ts).
    await check("GET /v1/runs/{id}/events", request("GET", `/v1/runs/${runId}/events`));
    await check("GET /v1/sessions/{key}/events", request("GET", `/v1/sessions/${enc(KEY)}/events`));
    const unknown = `/v1/sessions/${enc(`${KEY}-never-written`)}/events`;
    expect((await check("GET /v1/sessions/{key}/events", request("GET", unknown))).status).toBe(404);
    const patched = await check(
      "PATCH /v1/sessions/{key}",
      request("PATCH", `/v1/sessions/${enc(KEY)}`, { label: "contract", thinkingLevel: "low" }),
    );
    expect(patched.status).toBe(200);
    const row = await check("GET /v1/sessions/{key}", request("GET", `/v1/sessions/${enc(KEY)}`));
    // The row the contract checks is a full one: the fields a used session has are all there.
    expect(Object.keys(row.json).sort()).toEqual(
      [
        "key",
        "agentId",
        "kind",
        "channel",
        "displayName",
        "label",
        "updatedAt",
        "sessionId",
        "totalTokens",
        "inputTokens",
        "outputTokens",
        "thinkingLevel",
        "systemSent",
        "abortedLastRun",
        "lastChannel",
        "lastTo",
        "model",
        "deliveryContext",
        "transcriptPath",
      ].sort(),
    );
    const list = await check("GET /v1/sessions", request("GET", "/v1/sessions?limit=2"));
    expect(list.json.sessions.length).toBeGreaterThan(0);
    await check("GET /v1/sessions/{key}/history", request("GET", `/v1/sessions/${enc(KEY)}/history?includeTools=true`));
    const runs = await check("GET /v1/sessions/{key}/runs", request("GET", `/v1/sessions/${enc(KEY)}/runs?limit=5`));
    expect(runs.json.runs.length).toBeGreaterThan(0);
    const transcript = await check(
      "GET /v1/sessions/{key}/transcript.jsonl",
      request("GET", `/v1/sessions/${enc(KEY)}/transcript.jsonl`),
    );
    expect(transcript.text.split("\n").filter(Boolean).length).toBe(3);

    await request("POST", `/v1/sessions/${enc(OTHER)}/messages`, { message: "bye" });
    expect((await check("DELETE /v1/sessions/{key}", request("DELETE", `/v1/sessions/${enc(OTHER)}`))).status).toBe(
      200,
    );
    expect((await check("DELETE /v1/sessions/{key}", request("DELETE", `/v1/sessions/${enc(OTHER)}`))).status).toBe(
      404,
    );
    for (const path of ["", "/transcript.jsonl"])
      expect(
        (await check(`GET /v1/sessions/{key}${path}`, request("GET", `/v1/sessions/${enc(OTHER)}${path}`))).status,
        path,
      ).toBe(404);
  });

  it("a sub-agent's row carries its spawn and run fields", async () => {
    const spawned = await request("POST", "/tools/invoke", {
      tool: "sessions_spawn",
      args: { task: "say hi" },
      sessionKey: KEY,
    });
    const { childSessionKey, runId: childRun } = spawned.json.result.details;
    await check("GET /v1/runs/{id}/wait", request("GET", `/v1/runs/${childRun}/wait`));
    const row = await check("GET /v1/sessions/{key}", request("GET", `/v1/sessions/${enc(childSessionKey)}`));
    expect(row.json).toMatchObject({ spawnedBy: KEY, spawnDepth: 1, status: "done" });
    expect(Object.keys(row.json)).toEqual(expect.arrayContaining(["startedAt", "endedAt", "runtimeMs"]));
    // The child's announce runs after its run ended: let it finish before the next test.
    await quiesce();
    // The parent's sub-agent tree (its index rows are written behind the changes, so once they are there).
    const tree = `/v1/sessions/${enc(KEY)}/tree`;
    await vi.waitFor(
      async () =>
        expect(
          (await check("GET /v1/sessions/{key}/tree", request("GET", tree))).json.nodes.map((n: any) => n.key),
        ).toContain(childSessionKey),
      { timeout: 10_000, interval: 50 },
    );
    const treeStatus = async (path: string, opts = {}) =>
      (await check("GET /v1/sessions/{key}/tree", request("GET", path, undefined, opts))).status;
    expect(await treeStatus(tree, { token: RESEARCH_TOKEN })).toBe(403);
    expect(await treeStatus("/v1/sessions/agent%3A%3Abad/tree")).toBe(400);
    expect(await treeStatus(`/v1/sessions/${enc("agent:main:no-such-tree")}/tree`)).toBe(404);
  });

  it("deliveries, dead timers and attachments (rows written into the session's tables)", async () => {
    const now = Date.now();
    await runInDurableObject(env.SESSIONS.getByName(KEY), (_o, state) => {
      const payload = {
        channel: "telegram",
        to: "42",
        message: "hi",
        sessionKey: KEY,
        kind: "reply",
        idempotencyKey: "k",
      };
      state.storage.sql.exec(
        "INSERT INTO outbox (id, idempotency_key, kind, channel, payload_json, status, attempts, last_error, created_at, updated_at) VALUES (?, ?, 'reply', 'telegram', ?, 'dead', 6, 'HTTP 500', ?, ?)",
        DELIVERY_ID,
        `contract:${DELIVERY_ID}`,
        JSON.stringify(payload),
        now,
        now,
      );
      for (const kind of ["a2a", "outbox"])
        state.storage.sql.exec(
          "INSERT INTO dead_timers (kind, ref, payload, attempts, last_error, first_failed_at, died_at) VALUES (?, 'contract', NULL, 6, 'boom', ?, ?)",
          kind,
          now - 1000,
          now,
        );
      state.storage.sql.exec(
        "INSERT INTO attachments (name, mime_type, bytes, sha256, data) VALUES ('notes.txt', 'text/plain', 2, 'ab', ?)",
        new TextEncoder().encode("hi"),
      );
    });
    const listed = await check(
      "GET /v1/sessions/{key}/deliveries",
      request("GET", `/v1/sessions/${enc(KEY)}/deliveries`),
    );
    expect(listed.json.deliveries.map((d: any) => d.id)).toContain(DELIVERY_ID);
    const retried = `/v1/sessions/${enc(KEY)}/deliveries/${DELIVERY_ID}/retry`;
    expect((await check("POST /v1/sessions/{key}/deliveries/{id}/retry", request("POST", retried))).status).toBe(200);
    const missing = `/v1/sessions/${enc(KEY)}/deliveries/nope/retry`;
    expect((await check("POST /v1/sessions/{key}/deliveries/{id}/retry", request("POST", missing))).status).toBe(404);

    const timers = await check(
      "GET /v1/sessions/{key}/timers/dead",
      request("GET", `/v1/sessions/${enc(KEY)}/timers/dead`),
    );
    expect(timers.json.count).toBe(2);
    const retry = (kind: string, ref = "contract") =>
      check(
        "POST /v1/sessions/{key}/timers/dead/{kind}/{ref}/retry",
        request("POST", `/v1/sessions/${enc(KEY)}/timers/dead/${kind}/${ref}/retry`),
      );
    expect((await retry("a2a")).status).toBe(409);
    expect((await retry("outbox")).status).toBe(200);
    expect((await retry("outbox", "none")).status).toBe(404);
    expect((await retry("k".repeat(65))).status).toBe(400);

    const files = await check(
      "GET /v1/sessions/{key}/attachments",
      request("GET", `/v1/sessions/${enc(KEY)}/attachments`),
    );
    expect(files.json.attachments).toEqual([{ name: "notes.txt", mimeType: "text/plain", bytes: 2, sha256: "ab" }]);
    const file = "GET /v1/sessions/{key}/attachments/{name}";
    expect((await check(file, request("GET", `/v1/sessions/${enc(KEY)}/attachments/notes.txt`))).text).toBe("hi");
    expect((await check(file, request("GET", `/v1/sessions/${enc(KEY)}/attachments/none`))).status).toBe(404);
  });

  it("tools, MCP, agents, health and the docs", async () => {
    const invoke = (body: unknown, opts = {}) =>
      check("POST /tools/invoke", request("POST", "/tools/invoke", body, opts));
    expect((await invoke({ tool: "sessions_list", args: { limit: 1, messageLimit: 1 } })).status).toBe(200);
    expect((await invoke({ tool: "sessions_history", args: { sessionKey: KEY }, dryRun: true })).status).toBe(200);
    expect((await invoke({ tool: "nope" })).status).toBe(404);
    // A session being deleted refuses writes (src/session/closing.ts): a message into it is a 409.
    const closing = `agent:main:contract-closing-${crypto.randomUUID().slice(0, 8)}`;
    await request("POST", `/v1/sessions/${enc(closing)}/messages`, { message: "x" });
    const release = await runInDurableObject(env.SESSIONS.getByName(closing), (o) => beginClosing(o, "deleted"));
    const refused = await check(
      "POST /v1/sessions/{key}/messages",
      request("POST", `/v1/sessions/${enc(closing)}/messages`, { message: "x" }),
    );
    const patched = await check(
      "PATCH /v1/sessions/{key}",
      request("PATCH", `/v1/sessions/${enc(closing)}`, { label: "x" }),
    );
    release();
    expect(refused.status).toBe(409);
    expect(patched.status).toBe(409);
    expect((await invoke({ tool: 5 })).status).toBe(400);
    expect((await invoke({ tool: "sessions_list", sessionKey: KEY }, { token: RESEARCH_TOKEN })).status).toBe(403);

    const mcp = (body: unknown, opts = {}) => check("POST /mcp", request("POST", "/mcp", body, opts));
    expect((await mcp({ jsonrpc: "2.0", id: 1, method: "tools/list" })).status).toBe(200);
    expect((await mcp([{ jsonrpc: "2.0", id: 1, method: "ping" }])).status).toBe(200);
    expect((await mcp({ jsonrpc: "2.0", method: "notifications/initialized" })).status).toBe(202);
    expect((await mcp(undefined, { raw: "{not json" })).status).toBe(400);
    const batch = [{ jsonrpc: "2.0", id: 1, method: "ping" }];
    expect((await mcp(batch, { headers: { "MCP-Protocol-Version": "2025-11-25" } })).status).toBe(400);
    expect((await mcp(batch[0], { headers: { Origin: "https://evil.example.com" } })).status).toBe(403);
    expect((await mcp(batch[0], { headers: { "Content-Type": "text/plain" } })).status).toBe(415);
    expect(
      (
        await mcp(
          { jsonrpc: "2.0", id: 1, method: "tools/list" },
          { token: MAIN_TOKEN, headers: { "X-Session-Key": "agent:research:main" } },
        )
      ).status,
    ).toBe(403);

    const tools = (opts = {}) => check("GET /v1/tools", request("GET", "/v1/tools", undefined, opts));
    expect((await tools()).status).toBe(200);
    expect((await tools({ headers: { "X-Session-Key": "agent::bad" } })).status).toBe(400);
    expect((await tools({ token: MAIN_TOKEN, headers: { "X-Session-Key": "agent:research:main" } })).status).toBe(403);

    await check("GET /v1/agents", request("GET", "/v1/agents"));
    expect((await check("GET /v1/config", request("GET", "/v1/config"))).json.warnings).toEqual([]);
    expect((await check("GET /v1/config", request("GET", "/v1/config", undefined, { token: MAIN_TOKEN }))).status).toBe(
      403,
    );
    expect((await check("GET /healthz", request("GET", "/healthz"))).json.warnings).toBeDefined();
    expect(
      (await check("GET /healthz", request("GET", "/healthz", undefined, { token: null }))).json.warnings,
    ).toBeUndefined();
    await check("GET /docs", request("GET", "/docs", undefined, { token: null }));
    for (const path of ["/.well-known/mcp/server-card.json", "/mcp/server-card", "/.well-known/mcp/catalog.json"])
      expect((await check(`GET ${path}`, request("GET", path, undefined, { token: null }))).status).toBe(200);
  });

  it("A2A: agent cards, and the JSON-RPC endpoint's answer, refusals and unknown agent", async () => {
    const card = (path: string) =>
      check(`GET ${path.replace("/main/", "/{agentId}/")}`, request("GET", path, undefined, { token: null }));
    expect((await card("/.well-known/agent-card.json")).status).toBe(200);
    expect((await card("/a2a/main/.well-known/agent-card.json")).status).toBe(200);
    const unknown = request("GET", "/a2a/nobody/.well-known/agent-card.json", undefined, { token: null });
    expect((await check("GET /a2a/{agentId}/.well-known/agent-card.json", unknown)).status).toBe(404);
    const rpc = (agentId: string, opts: Parameters<typeof request>[3] = {}) =>
      check(
        "POST /a2a/{agentId}",
        request(
          "POST",
          `/a2a/${agentId}`,
          { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "nope" } },
          {
            ...opts,
            headers: { "A2A-Version": "1.0", ...(opts.headers ?? {}) },
          },
        ),
      );
    expect((await rpc("main")).json.error.code).toBe(-32001);
    expect((await rpc("main", { headers: { "Last-Event-ID": "not an id" } })).status).toBe(400);
    expect((await rpc("main", { token: RESEARCH_TOKEN })).status).toBe(403);
    expect((await rpc("nobody")).status).toBe(404);
  });

  it("webhook runs: complete with the run token; a second, racing completion is a 409", async () => {
    setConfigOverride({
      agents: {
        list: [
          { id: "main", default: true },
          { id: "hook", runtime: { type: "webhook", url: "https://runtime.test/a", secret: "s" } },
        ],
      },
    });
    const tokens: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      tokens.push(JSON.parse(String(init?.body)).runToken);
      return new Response(null, { status: 202 });
    });
    const complete = (id: string, body: unknown, token?: string) =>
      check("POST /v1/runs/{id}/complete", request("POST", `/v1/runs/${id}/complete`, body, { token }));
    const key = `agent:hook:contract-${crypto.randomUUID().slice(0, 8)}`;
    const id = (await request("POST", `/v1/sessions/${enc(key)}/messages`, { message: "go" })).json.runId;
    await vi.waitUntil(() => tokens.length > 0);
    expect((await complete(id, { reply: "x" })).status).toBe(403);
    expect((await complete(id, { reply: "x", error: "y" }, tokens[0])).status).toBe(400);
    // Both completions pass the token check before either ends the run: each waits at finishRun for the other.
    const finishRun = SessionObject.prototype.finishRun;
    let arrived = 0;
    let bothArrived!: () => void;
    const gate = new Promise<void>((r) => (bothArrived = r));
    vi.spyOn(SessionObject.prototype, "finishRun").mockImplementation(async function (this: SessionObject, ...args) {
      if (++arrived === 2) bothArrived();
      await gate;
      return finishRun.apply(this, args);
    });
    const [a, b] = await Promise.all([
      complete(id, { reply: "one" }, tokens[0]),
      complete(id, { reply: "two" }, tokens[0]),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    expect((await complete(id, { reply: "again" }, tokens[0])).status).toBe(401);

    // The heartbeat of a held run: its fresh token; the operator's 403; a run that ends between the token check and the renewal, 409.
    const beat = (runId: string, token?: string) =>
      check("POST /v1/runs/{id}/heartbeat", request("POST", `/v1/runs/${runId}/heartbeat`, undefined, { token }));
    const held = (await request("POST", `/v1/sessions/${enc(key)}/messages`, { message: "again" })).json.runId;
    await vi.waitUntil(() => tokens.length > 1);
    expect((await beat(held, tokens[1])).status).toBe(200);
    expect((await beat(held)).status).toBe(403);
    expect((await beat("x".repeat(1025), tokens[1])).status).toBe(400);
    vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(async function (this: SessionObject) {
      await this.abortRun(held);
      return { run: await this.getRun(held), deadline: null, leaseExpiresAt: null };
    });
    expect((await beat(held, tokens[1])).status).toBe(409);
  });

  it("400, 403, 404 and 413 of the session and run routes", async () => {
    const bad = enc("agent::main");
    for (const op of contract.operations().filter((o) => o.includes("{key}"))) {
      const [method, path] = op.split(" ");
      const body = bodyOf(method) && (path.endsWith("/messages") ? { message: "x" } : { label: "x" });
      expect((await check(op, request(method, fill(path).replace(enc(KEY), bad), body))).status, op).toBe(400);
      const forbidden = await check(op, request(method, fill(path), body, { token: RESEARCH_TOKEN }));
      expect(forbidden.status, op).toBe(403);
    }
    for (const op of contract
      .operations()
      .filter((o) => o.startsWith("GET /v1/runs") || o.startsWith("POST /v1/runs"))) {
      const [method, path] = op.split(" ");
      if (path.endsWith("/complete") || path.endsWith("/heartbeat")) continue;
      expect((await check(op, request(method, path.replace("{id}", "x".repeat(1025))))).status, op).toBe(400);
      expect((await check(op, request(method, path.replace("{id}", "not-a-run")))).status, op).toBe(404);
      expect(
        (await check(op, request(method, path.replace("{id}", runId), undefined, { token: RESEARCH_TOKEN }))).status,
        op,
      ).toBe(403);
    }
    await check("GET /v1/sessions", request("GET", "/v1/sessions?limit=0"));
    await check("GET /v1/sessions", request("GET", "/v1/sessions?agentId=main", undefined, { token: RESEARCH_TOKEN }));
    await check("GET /v1/sessions", request("GET", "/v1/sessions?agentId=ghost"));
    const huge = "x".repeat(2 * 1024 * 1024 + 1);
    for (const op of contract
      .documented()
      .filter((d) => d.endsWith(" 413"))
      .map((d) => d.slice(0, -4))) {
      const [method, path] = op.split(" ");
      expect((await check(op, request(method, fill(path), { message: huge, pad: huge }))).status, op).toBe(413);
    }
    const big = "x".repeat(600 * 1024);
    expect(
      (
        await check(
          "POST /v1/sessions/{key}/messages",
          request("POST", `/v1/sessions/${enc(KEY)}/messages`, { message: big }),
        )
      ).status,
    ).toBe(413);
  });

  it("401, 429 and 500 of every route that documents them", async () => {
    // Failed authentications are counted per credential and per address by the AUTH_FAILURES binding: each 401
    // comes from a client and a wrong token of its own, and one address is driven over the limit for the 429s.
    let n = 0;
    const limitedClient = { "CF-Connecting-IP": "203.0.113.7" };
    for (let i = 0; i < 12; i++)
      await request("GET", "/v1/agents", undefined, { token: `wrong-${i}`, headers: limitedClient });
    for (const op of contract.operations()) {
      const [method, path] = op.split(" ");
      const statuses = contract
        .documented()
        .filter((d) => d.startsWith(`${op} `))
        .map((d) => d.slice(op.length + 1));
      if (statuses.includes("401")) {
        const client = { "CF-Connecting-IP": `198.51.100.${++n}` };
        const refused = await check(
          op,
          request(method, fill(path), bodyOf(method), { token: `wrong-${n}`, headers: client }),
        );
        expect(refused.status, op).toBe(401);
      }
      if (statuses.includes("429")) {
        const client = { "CF-Connecting-IP": "203.0.113.7" };
        for (let i = 0; i < 12; i++)
          await request("GET", "/v1/agents", undefined, { token: `wrong-${i}`, headers: client });
        // A failing request from an address over its limit (a valid token is never refused: docs/limits.md).
        const limited = await check(
          op,
          request(method, fill(path), bodyOf(method), { token: "another-wrong-token", headers: client }),
        );
        expect(limited.status, op).toBe(429);
        authLimiter.reset();
      }
      if (statuses.includes("500")) {
        const broken = await check(op, request(method, fill(path), bodyOf(method), { env: { CONFIG: "{not json" } }));
        expect(broken.json.error.type, op).toBe("config_error");
      }
    }
  });

  it("every documented answer was produced and matched its schema", () => {
    // The task ledger's answers are produced by test/http/openapi-contract-tasks.test.ts; their 401, 429 and 500 here.
    const unseen = contract.documented().filter((d) => !contract.seen.has(d) && !ownedElsewhere(d));
    expect(unseen).toEqual([]);
  });
});

import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { benchApp, benchExtensions } from "../../bench/worker";
import { loadConfig } from "../../src/config/load";
import { sessionIndex } from "../../src/registry/session-index";
import { SessionObject } from "../../src/session/session-object";
import { call, GATEWAY, MAIN_TOKEN } from "../helpers/http";

/**
 * The bench Worker's session object is the production class with the bench extension added (bench/worker.ts).
 * The objects here are the production class, so their extension calls go through the bench Worker's list.
 */
beforeEach(() => {
  vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
    this: SessionObject,
    name,
    method,
    arg,
  ) {
    return benchExtensions.call(this, name, method, arg);
  });
});

/** The bench Worker's app (bench/worker.ts), over the same bindings and objects as the production Worker. */
async function benchCall(method: string, path: string, body?: unknown, token: string | null = GATEWAY) {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const req = new Request(`https://switchboard.test${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const res = await benchApp.fetch(req, env);
  return { status: res.status, json: (await res.json()) as any };
}

describe("bench routes", () => {
  it("are absent from the production Worker: every path answers like an unknown route and changes nothing", async () => {
    const before = await sessionIndex(env, loadConfig(env), "research").count();
    for (const [method, path, body] of [
      ["GET", "/v1/_bench/ping/main", undefined],
      ["POST", "/v1/_bench/seed/sessions", { agentId: "research", count: 5 }],
      ["POST", "/v1/_bench/seed/transcript", { sessionKey: "agent:research:bench-off", count: 5 }],
      ["GET", "/v1/_bench/run-order/main", undefined],
      ["POST", "/v1/_bench/lane", { agents: 1, spawns: 1, gatewayMax: null, tag: "off" }],
    ] as const) {
      const r = await call(method, path, body);
      expect(r.status).toBe(404);
      expect(r.json).toEqual({ ok: false, error: { type: "not_found", message: `No route for ${method} ${path}` } });
    }
    expect(await sessionIndex(env, loadConfig(env), "research").count()).toBe(before);
    expect(await env.SESSIONS.getByName("agent:research:bench-off").getMeta()).toBeNull();
  });

  it("bench Worker: its /openapi.json leaves the bench routes out (the production bundle names none of them)", async () => {
    const doc = await benchCall("GET", "/openapi.json");
    expect(doc.status).toBe(200);
    const paths = Object.keys(doc.json.paths);
    expect(paths).toContain("/v1/sessions/{key}");
    expect(paths.filter((p) => p.includes("_bench"))).toEqual([]);
  });

  it("bench Worker: the bare route is auth + one object call", async () => {
    expect(await benchCall("GET", "/v1/_bench/ping/main")).toEqual({ status: 200, json: { ok: true } });
    expect((await benchCall("GET", "/v1/_bench/ping/main", undefined, null)).status).toBe(401);
    expect((await benchCall("GET", "/v1/_bench/ping/agent:research:main", undefined, MAIN_TOKEN)).status).toBe(403);
  });

  it("bench Worker: seeding needs the operator token and bounded batches", async () => {
    const agentToken = await benchCall("POST", "/v1/_bench/seed/sessions", { agentId: "main", count: 5 }, MAIN_TOKEN);
    expect(agentToken.status).toBe(403);
    const tooMany = await benchCall("POST", "/v1/_bench/seed/sessions", { agentId: "main", count: 5_001 });
    expect(tooMany.status).toBe(400);
    const unknown = await benchCall("POST", "/v1/_bench/seed/sessions", { agentId: "nobody", count: 1 });
    expect(unknown.json.error.message).toBe('agentId: unknown agent "nobody"');
  });

  it("bench Worker: the lane route admits each agent's spawns through its own lane, operator only, within one request's call budget", async () => {
    const body = { agents: 3, spawns: 4, gatewayMax: null, tag: `t${crypto.randomUUID().slice(0, 6)}` };
    expect((await benchCall("POST", "/v1/_bench/lane", body, MAIN_TOKEN)).status).toBe(403);
    expect((await benchCall("POST", "/v1/_bench/lane", { ...body, agents: 100, spawns: 50 })).status).toBe(403);
    const r = await benchCall("POST", "/v1/_bench/lane", body);
    expect(r.status).toBe(200);
    expect(r.json.spawns).toBe(12);
    expect(r.json.perSpawnMs).toHaveLength(12);
    // Each agent's children went through that agent's lane, and each lane is empty again.
    for (let a = 0; a < 3; a++)
      expect(await env.SUBAGENT_LANE.getByName(`lane:agent:bench-${body.tag}-${a}`).snapshot()).toEqual({
        running: 0,
        waiting: 0,
        leases: 0,
      });
  });

  it("bench Worker: seeded transcripts are real transcripts (history pages, numbering continues across batches)", async () => {
    const key = "agent:main:bench-transcript";
    expect((await benchCall("POST", "/v1/_bench/seed/transcript", { sessionKey: key, count: 3 })).json.total).toBe(3);
    expect(
      (await benchCall("POST", "/v1/_bench/seed/transcript", { sessionKey: key, count: 2, startText: "more" })).json
        .total,
    ).toBe(5);
    const page = await call("GET", `/v1/sessions/${encodeURIComponent(key)}/history?limit=2`);
    expect(page.json.messages.map((m: any) => [m.role, m.content[0].text.split(":")[0]])).toEqual([
      ["assistant", "more #4"],
      ["user", "more #5"],
    ]);
    expect(page.json.hasMore).toBe(true);
  });

  it("bench Worker: seeded children page completely under tree visibility (own row + children, in order, cursor included)", async () => {
    const seeded = await benchCall("POST", "/v1/_bench/seed/sessions", {
      agentId: "research",
      from: 0,
      count: 30,
      childrenOf: "agent:research:main",
      childEvery: 3,
    });
    expect(seeded.json.seeded).toBe(30);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const r = await call("POST", "/tools/invoke", {
        tool: "sessions_list",
        sessionKey: "agent:research:main",
        args: { limit: 4, ...(cursor ? { cursor } : {}) },
      });
      const d = r.json.result.details;
      expect(d.visibility).toBe("tree");
      seen.push(...d.sessions.map((s: any) => s.key));
      cursor = d.nextCursor;
      if (!cursor) break;
    }
    // Children are n = 0, 3, …, 27; n = 0 is the newest (updatedAt steps back with n).
    expect(seen).toEqual(
      Array.from({ length: 10 }, (_, i) => `agent:research:subagent:s${String(i * 3).padStart(6, "0")}`),
    );
  });
});

describe("bench Worker: index measurements (bench/index.mjs)", () => {
  it("stored bytes: an index row costs its share of the shard's database, a session object grows with its turns", async () => {
    const bytes = await benchCall("POST", "/v1/_bench/index/bytes", { agentId: "benchbytes", count: 500 });
    expect(bytes.status).toBe(200);
    expect(bytes.json.rows).toBe(500);
    // SQLite pages of 4 KiB: an empty shard is its schema; 500 rows of ~1 KB each add hundreds of KB.
    expect(bytes.json.bytesBefore % 4096).toBe(0);
    const perRow = (bytes.json.bytesAfter - bytes.json.bytesBefore) / 500;
    expect(perRow).toBeGreaterThan(500);
    expect(perRow).toBeLessThan(4096);
    const key = "agent:main:bench-bytes";
    const size = async () => (await benchCall("GET", `/v1/_bench/session-bytes/${encodeURIComponent(key)}`)).json.bytes;
    await benchCall("POST", "/v1/_bench/seed/transcript", { sessionKey: key, count: 2 });
    const small = await size();
    await benchCall("POST", "/v1/_bench/seed/transcript", { sessionKey: key, count: 200 });
    expect(small).toBeGreaterThan(0);
    expect(await size()).toBeGreaterThan(small);
    expect((await benchCall("POST", "/v1/_bench/index/bytes", { agentId: "x", count: 1 }, MAIN_TOKEN)).status).toBe(
      403,
    );
  });

  it("profile: a page and the bare fan-out, timed in the Worker, reps bounded", async () => {
    await benchCall("POST", "/v1/_bench/index/seed", { agentId: "benchprof", shards: 4, count: 60 });
    for (const what of ["page", "empty"]) {
      const r = await benchCall("GET", `/v1/_bench/index/profile?agentId=benchprof&shards=4&what=${what}&reps=3`);
      expect(r.status).toBe(200);
      expect(typeof r.json.msPerCall).toBe("number");
    }
    expect(
      (await benchCall("GET", "/v1/_bench/index/profile?agentId=benchprof&shards=4&what=page&reps=201")).status,
    ).toBe(400);
  });
});

describe("production Worker", () => {
  it("registers no bench route and its session object has no seeding method", async () => {
    const { createApp } = await import("../../src/http/app");
    expect(createApp().routes.filter((r) => r.path.includes("_bench"))).toEqual([]);
    const { SessionObject } = await import("../../src/session/session-object");
    for (const method of ["ping", "seedTranscript", "runOrder", "storedBytes"])
      expect(method in SessionObject.prototype).toBe(false);
  });
});

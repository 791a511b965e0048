import { type Context, Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { forbidden, invalid } from "../src/errors";
import type { AppEnv } from "../src/http/app-env";
import { authorizeKey } from "../src/http/auth";
import { valid } from "../src/http/validate";
import { keyContextOf, parseCanonical, parseSessionKey } from "../src/keys";
import { indexShardStub } from "../src/registry/registry-stubs";
import { type IndexEntry, indexEntryOf } from "../src/registry/row";
import { SessionIndex, sessionIndex } from "../src/registry/session-index";
import { INDEX_SHARDS_MAX } from "../src/registry/shard-hash";
import { MESSAGE_MAX_BYTES } from "../src/session/byte-budget";
import { callExtension } from "../src/session/extensions";
import type { SessionMeta } from "../src/session/types";
import { laneBenchRoutes } from "./lane-routes";
import { addSearchBenchRoutes } from "./search-routes";

/** Largest batch one seeding request may write: keeps every request short and its RPC payload small. */
const SEED_SESSIONS_MAX_BATCH = 5_000;
const SEED_MESSAGES_MAX_BATCH = 20_000;
/** …and at most this many bytes of text per seeding request (count × textBytes). */
const SEED_MESSAGES_MAX_BATCH_BYTES = 32 * 1024 * 1024;

const seedSessionsBody = z.object({
  agentId: z.string().min(1).max(64),
  /** Number of the first seeded session; batches continue where the previous one stopped. */
  from: z.number().int().min(0).default(0),
  count: z.number().int().min(1).max(SEED_SESSIONS_MAX_BATCH),
  /** Make every `childEvery`-th session a sub-agent spawned by `childrenOf` (tree visibility). */
  childrenOf: z.string().min(1).optional(),
  childEvery: z.number().int().min(1).optional(),
});

const shardCount = z.number().int().min(1).max(INDEX_SHARDS_MAX);
const indexSeedBody = z.object({
  agentId: z.string().min(1).max(64),
  shards: shardCount,
  from: z.number().int().min(0).default(0),
  count: z.number().int().min(1).max(SEED_SESSIONS_MAX_BATCH),
});
const indexListQuery = z.object({
  agentId: z.string().min(1).max(64),
  shards: z.coerce.number().pipe(shardCount),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
const indexProfileQuery = z.object({
  agentId: z.string().min(1).max(64),
  shards: z.coerce.number().pipe(shardCount),
  what: z.enum(["page", "empty", "noop"]),
  reps: z.coerce.number().int().min(1).max(200).default(40),
});
const indexBytesBody = z.object({
  agentId: z.string().min(1).max(64),
  count: z.number().int().min(1).max(SEED_SESSIONS_MAX_BATCH),
});
/** At most 1,000 writes per request (a Worker request's subrequest budget) and 64 in flight. */
const indexWritesBody = z.object({
  agentId: z.string().min(1).max(64),
  /** Absent: the agent's own layout from CONFIG (a self-sizing index unless it sets indexShards). */
  shards: shardCount.optional(),
  from: z.number().int().min(0).default(0),
  sessions: z.number().int().min(1).max(1_000_000),
  count: z.number().int().min(1).max(1_000),
  concurrency: z.number().int().min(1).max(64),
});

const seedTranscriptBody = z.object({
  sessionKey: z.string().min(1),
  count: z.number().int().min(1).max(SEED_MESSAGES_MAX_BATCH),
  startText: z.string().max(200).default("seeded message"),
  /** Size of each message's text (default: a typical ~200-byte chat turn); at most one inbound message's cap. */
  textBytes: z.number().int().min(1).max(MESSAGE_MAX_BYTES).optional(),
});

/**
 * Routes used only by `npm run bench` (bench/run.mjs): a bare route (auth + one object call, the
 * floor of this stack) and bulk seeding that skips real runs. Mounted only by the bench Worker
 * (bench/worker.ts); the production Worker (src/index.ts) never contains them.
 */
function addBenchRoutes(app: Hono<AppEnv>): void {
  // Not part of the public contract: left out of the bench Worker's /openapi.json (test/bench/bench-routes.test.ts).
  const hidden = describeRoute({ hide: true });

  /**
   * Auth + key parse + one RPC that touches no storage: what every real route costs at least.
   * POST too, for bursts: wrangler's dev proxy parks a dropped GET until a reload that never comes,
   * while a dropped POST is answered 503 and can be retried.
   */
  app.on(["GET", "POST"], "/v1/_bench/ping/:key", hidden, async (c) => {
    const cfg = c.get("cfg");
    const parsed = parseSessionKey(c.req.param("key"), keyContextOf(cfg));
    authorizeKey(c.get("principal"), parsed);
    const pad = Math.min(Number(c.req.query("pad") ?? 0) || 0, PING_MAX_PAD);
    return c.json(await callExtension(c.env.SESSIONS.getByName(parsed.canonicalKey), "bench", "ping", pad));
  });

  /** Index `count` synthetic sessions of one agent (no session objects are created). */
  app.post("/v1/_bench/seed/sessions", hidden, valid("json", seedSessionsBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    const cfg = c.get("cfg");
    const agentId = body.agentId.toLowerCase();
    if (!cfg.agents.roster.some((a) => a.id === agentId)) throw invalid(`agentId: unknown agent "${agentId}"`);
    const now = Date.now();
    const entries: IndexEntry[] = [];
    const parent = body.childrenOf
      ? parseSessionKey(body.childrenOf, keyContextOf(cfg, agentId)).canonicalKey
      : undefined;
    for (let n = body.from; n < body.from + body.count; n++) {
      const child = parent !== undefined && n % (body.childEvery ?? 1) === 0;
      entries.push(syntheticEntry(cfg, agentId, n, now, child ? parent : undefined));
    }
    const registry = sessionIndex(c.env, cfg, agentId);
    await registry.upsertMany(entries);
    return c.json({ agentId, seeded: entries.length, total: await registry.count() });
  });

  /** Append synthetic messages to one session's transcript (the session is created if needed). */
  app.post("/v1/_bench/seed/transcript", hidden, valid("json", seedTranscriptBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    if (body.textBytes && body.count * body.textBytes > SEED_MESSAGES_MAX_BATCH_BYTES)
      throw invalid(`count × textBytes: at most ${SEED_MESSAGES_MAX_BATCH_BYTES} bytes per request`);
    const parsed = parseSessionKey(body.sessionKey, keyContextOf(c.get("cfg")));
    const res = await callExtension(c.env.SESSIONS.getByName(parsed.canonicalKey), "bench", "seedTranscript", {
      count: body.count,
      startText: body.startText,
      textBytes: body.textBytes,
    });
    return c.json({ sessionKey: parsed.canonicalKey, seeded: body.count, total: res.total });
  });

  /**
   * The index at a given shard count (bench/index.mjs): seed, list one page, or write rows as fast as
   * the shards take them. The shard count is a parameter here so one run compares 1 and N shards.
   */
  app.post("/v1/_bench/index/seed", hidden, valid("json", indexSeedBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    const cfg = c.get("cfg");
    const entries = Array.from({ length: body.count }, (_, i) =>
      syntheticEntry(cfg, body.agentId, body.from + i, Date.now()),
    );
    await new SessionIndex(c.env, body.shards, body.agentId).upsertMany(entries);
    return c.json({ seeded: entries.length });
  });

  app.get("/v1/_bench/index/list", hidden, valid("query", indexListQuery), async (c) => {
    requireOperator(c);
    const q = c.req.valid("query");
    const page = await new SessionIndex(c.env, q.shards, q.agentId).list({ scope: { type: "agent" }, limit: q.limit });
    return c.json({ count: page.rows.length, sessions: page.rows, next: page.next });
  });

  /**
   * Where a page's time goes: `reps` sequential calls timed inside the Worker (no HTTP, no concurrency).
   * `page` is one listing page of 50; `empty` asks every shard an indexed lookup that finds nothing —
   * the fixed cost of the fan-out alone; `noop` asks every shard for its database size (no SQL at all) —
   * the cost of the calls themselves, which no code of ours can lower.
   */
  app.get("/v1/_bench/index/profile", hidden, valid("query", indexProfileQuery), async (c) => {
    requireOperator(c);
    const q = c.req.valid("query");
    const index = new SessionIndex(c.env, q.shards, q.agentId);
    const t0 = Date.now();
    for (let r = 0; r < q.reps; r++) {
      if (q.what === "page") await index.list({ scope: { type: "agent" }, limit: 50 });
      else if (q.what === "empty") await Promise.all(index.allShards().map((s) => s.lookupSessionId("none")));
      else await Promise.all(index.allShards().map((s) => s.storedBytes()));
    }
    return c.json({ msPerCall: (Date.now() - t0) / q.reps });
  });

  /** Stored bytes per index row: a fresh one-shard index before and after `count` rows (with their locators). */
  app.post("/v1/_bench/index/bytes", hidden, valid("json", indexBytesBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    const cfg = c.get("cfg");
    const index = new SessionIndex(c.env, 1, body.agentId);
    const shard = index.allShards()[0];
    const before = await shard.storedBytes();
    const entries = Array.from({ length: body.count }, (_, i) => syntheticEntry(cfg, body.agentId, i, Date.now()));
    await index.upsertMany(entries);
    const after = await shard.storedBytes();
    return c.json({ rows: body.count, bytesBefore: before, bytesAfter: after });
  });

  /** Stored bytes of one session object (its whole SQLite database). */
  app.get("/v1/_bench/session-bytes/:key", hidden, async (c) => {
    requireOperator(c);
    const parsed = parseSessionKey(c.req.param("key"), keyContextOf(c.get("cfg")));
    const bytes = await callExtension(c.env.SESSIONS.getByName(parsed.canonicalKey), "bench", "storedBytes");
    return c.json({ sessionKey: parsed.canonicalKey, bytes });
  });

  /** `count` row writes (sessions `from`… cycling over `sessions`), `concurrency` in flight; the answer says how long they took. */
  app.post("/v1/_bench/index/writes", hidden, valid("json", indexWritesBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    const cfg = c.get("cfg");
    const index =
      body.shards === undefined
        ? sessionIndex(c.env, cfg, body.agentId)
        : new SessionIndex(c.env, body.shards, body.agentId);
    const t0 = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < body.count) {
        const n = body.from + (next++ % body.sessions);
        await index.upsert(syntheticEntry(cfg, body.agentId, n, Date.now()), { locatorWritten: true });
      }
    };
    await Promise.all(Array.from({ length: body.concurrency }, worker));
    return c.json({ writes: body.count, ms: performance.now() - t0 });
  });

  /**
   * The self-sizing index (bench/index-split.mjs): its recorded layout, and one doubling started now, as a
   * shard past its threshold would start it (thresholds that never merge it back during the bench).
   */
  app.get("/v1/_bench/index/layout", hidden, async (c) => {
    requireOperator(c);
    const agentId = c.req.query("agentId") ?? "";
    return c.json({ layout: await indexShardStub(c.env, agentId, 0).readLayout() });
  });
  app.post("/v1/_bench/index/split", hidden, async (c) => {
    requireOperator(c);
    const { agentId } = (await c.req.json()) as { agentId: string };
    const layout = await sessionIndex(c.env, c.get("cfg"), agentId).layout();
    const now = { rows: 1, writesPerSecond: 1, sustainMs: 0, coolMs: 365 * 86_400_000, maxShards: INDEX_SHARDS_MAX };
    return c.json({ layout: await indexShardStub(c.env, agentId, 0).requestSplit(agentId, layout.epoch, now) });
  });

  /** A session's runs in queue order with their transcript positions (the send-order check). */
  app.get("/v1/_bench/run-order/:key", hidden, async (c) => {
    requireOperator(c);
    const parsed = parseSessionKey(c.req.param("key"), keyContextOf(c.get("cfg")));
    return c.json({
      sessionKey: parsed.canonicalKey,
      runs: await callExtension(c.env.SESSIONS.getByName(parsed.canonicalKey), "bench", "runOrder", RUN_ORDER_MAX),
    });
  });
}

const RUN_ORDER_MAX = 10_000;
const PING_MAX_PAD = 1_000_000;

function requireOperator(c: Context<AppEnv>): void {
  if (c.get("principal").role !== "operator") throw forbidden("Bench seeding needs the operator token");
}

/**
 * Index entry of synthetic session `n`: a sub-agent of `spawnedBy` when given, else one in five is a
 * group chat so kind filters have something to filter; updatedAt steps back one second per session
 * so the list order is total and stable.
 */
function syntheticEntry(
  cfg: AppEnv["Variables"]["cfg"],
  agentId: string,
  n: number,
  now: number,
  spawnedBy?: string,
): IndexEntry {
  const id = String(n).padStart(6, "0");
  const key = spawnedBy
    ? `agent:${agentId}:subagent:s${id}`
    : n % 5 === 0
      ? `agent:${agentId}:telegram:group:g${id}`
      : `agent:${agentId}:telegram:direct:u${id}`;
  const parsed = parseCanonical(key, cfg);
  const updatedAt = now - n * 1_000;
  const meta: SessionMeta = {
    key,
    agentId,
    sessionId: crypto.randomUUID(),
    kind: parsed.kind,
    createdAt: updatedAt,
    updatedAt,
    inputTokens: 120,
    outputTokens: 80,
    totalTokens: 200,
    systemSent: true,
    abortedLastRun: false,
    lastChannel: "telegram",
    lastTo: `u${id}`,
    model: "echo",
    modelProvider: "builtin",
    ...(parsed.kind === "group" ? { channel: "telegram", chatType: "group" as const } : {}),
    ...(spawnedBy ? { spawnedBy, spawnDepth: 1 } : {}),
  };
  return indexEntryOf(meta, parsed);
}

/** The bench routes as one sub-app (bench/worker.ts mounts it after the production routes). */
export const benchRoutes = new Hono<AppEnv>();
addBenchRoutes(benchRoutes);
benchRoutes.route("/", laneBenchRoutes);
addSearchBenchRoutes(benchRoutes);

import type { Context, Hono } from "hono";
import { describeRoute } from "hono-openapi";
import { z } from "zod";
import { forbidden } from "../src/errors";
import type { AppEnv } from "../src/http/app-env";
import { valid } from "../src/http/validate";
import { INGEST_MANY_MAX, type IngestBatch } from "../src/search/search-index-object";
import { SEARCH_SHARDS, searchShard, searchShardOf } from "../src/search/search-shards";

/**
 * The bench's seeding of the search index (bench/search.mjs): synthetic sessions' messages written into
 * the index shards directly (no session objects), so one run can search 100 and 100,000 sessions side by
 * side. Mounted only by the bench Worker (bench/worker.ts), hidden from its OpenAPI document.
 */

/** A word in the first NEEDLE_SESSIONS sessions only, whatever the total: a rare query's hits stay the same. */
export const NEEDLE_WORD = "kumquat";
export const NEEDLE_SESSIONS = 20;
/** A word in every session's first message: a common query's matches grow with the store. */
export const COMMON_WORD = "report";

const seedBody = z.object({
  agentId: z.string().min(1).max(64),
  from: z.number().int().min(0).default(0),
  count: z.number().int().min(1).max(INGEST_MANY_MAX),
});

const SYLLABLES = ["ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "va", "ze", "bo", "di", "fe", "gu", "ha", "ji"];

/** Word `i` of a 4,096-word synthetic vocabulary. */
function word(i: number): string {
  return SYLLABLES[i % 16] + SYLLABLES[(i >> 4) % 16] + SYLLABLES[(i >> 8) % 16];
}

/** A deterministic chat turn of ~30 words for session `n`, message `m`. */
function turnText(n: number, m: number): string {
  let x = (n * 7919 + m * 104_729 + 1) >>> 0;
  const words: string[] = [];
  for (let i = 0; i < 30; i++) {
    x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0;
    words.push(word(x >>> 20));
  }
  if (m === 0) words.splice(3, 0, COMMON_WORD);
  if (m === 0 && n < NEEDLE_SESSIONS) words.splice(10, 0, NEEDLE_WORD);
  return words.join(" ");
}

function requireOperator(c: Context<AppEnv>): void {
  if (c.get("principal").role !== "operator") throw forbidden("Bench seeding needs the operator token");
}

export function addSearchBenchRoutes(app: Hono<AppEnv>): void {
  const hidden = describeRoute({ hide: true });

  /** Index `count` synthetic sessions of one agent (a question and an answer each), grouped per shard. */
  app.post("/v1/_bench/search/seed", hidden, valid("json", seedBody), async (c) => {
    requireOperator(c);
    const body = c.req.valid("json");
    const now = Date.now();
    const byShard: IngestBatch[][] = Array.from({ length: SEARCH_SHARDS }, () => []);
    for (let n = body.from; n < body.from + body.count; n++) {
      const key = `agent:${body.agentId}:telegram:direct:u${String(n).padStart(6, "0")}`;
      const ts = now - n * 1_000;
      byShard[searchShardOf(key)].push({
        key,
        sessionId: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
        spawnedBy: null,
        docs: [
          { seq: 1, role: "user", ts, text: turnText(n, 0) },
          { seq: 2, role: "assistant", ts: ts + 1, text: turnText(n, 1) },
        ],
      });
    }
    const indexed = await Promise.all(
      byShard.map((batches, shard) =>
        batches.length ? searchShard(c.env, body.agentId, shard).ingestMany(batches) : { indexed: 0 },
      ),
    );
    return c.json({ agentId: body.agentId, sessions: body.count, indexed: indexed.reduce((n, r) => n + r.indexed, 0) });
  });
}

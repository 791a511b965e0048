import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardOf } from "../../src/registry/shard-hash";
import { visToken } from "../../src/search/hash";
import { matchExpression } from "../../src/search/query-text";
import { SEARCH_CANDIDATES_PER_SHARD } from "../../src/search/search-index-object";
import { searchShardOf } from "../../src/search/search-shards";
import { queryWords, snippetOf } from "../../src/search/snippet";

/** A shard of its own per test (names are free; storage outlives a test). */
const shard = (name: string) => env.SEARCH.getByName(`search:test:${name}`);
const doc = (seq: number, text: string, ts = seq) => ({ seq, role: "user" as const, ts, text });
const agentScope = { type: "agent" as const };
const find = (name: string, query: string, limit = 10) =>
  shard(name).search({ match: matchExpression(query)!, words: queryWords(query), scope: agentScope, limit });

describe("snippets", () => {
  it('a window of 48 words around the best hit, eight words of lead, " … " where the text is cut, folded matching', () => {
    const words = Array.from({ length: 100 }, (_, i) => `w${i}`);
    words[50] = "Crème";
    const s = snippetOf(words.join(" "), queryWords("creme"));
    expect(s).toBe(`… ${words.slice(42, 90).join(" ")} …`);
    // The window with the most distinct query words wins over the first hit.
    words[5] = "brulee";
    words[60] = "brûlée";
    expect(snippetOf(words.join(" "), queryWords("creme brulee")).startsWith("… w42 ")).toBe(true);
    expect(snippetOf("short text here", queryWords("text"))).toBe("short text here");
    expect(queryWords("foo-bar FOO Ünïcode")).toEqual(["foo", "bar", "unicode"]);
  });
});

describe("key hashes", () => {
  it("a session's search shard and visibility tokens never move: pinned values of the one FNV-1a the registry shares", () => {
    // Stored rows depend on these (a session's shard, the `vis` column): a change to the hash would strand them.
    expect(["agent:main:main", "agent:main:search-shape", "agent:research:subagent:é✓"].map(searchShardOf)).toEqual([
      0, 1, 0,
    ]);
    expect(visToken("k", "agent:main:main")).toBe("k9jxldgx1v6uruu");
    expect(visToken("p", "agent:research:subagent:é✓")).toBe("pqwz200x1pe1whi");
    // The registry's shard of the same key comes from the same hash.
    expect(shardOf("agent:main:main", 16)).toBe(4);
    expect(shardOf("agent:main:search-shape", 16)).toBe(5);
  });
});

describe("SearchIndexObject", () => {
  it("indexes a push once: a retried push adds nothing", async () => {
    const s = shard("idem");
    const batch = { key: "agent:t:a", sessionId: "s1", spawnedBy: null, docs: [doc(1, "apple"), doc(2, "banana")] };
    expect(await s.ingest(batch)).toEqual({ indexed: 2 });
    expect(await s.ingest(batch)).toEqual({ indexed: 0 });
    expect(await s.ingest({ ...batch, docs: [doc(2, "banana"), doc(3, "cherry")] })).toEqual({ indexed: 1 });
    expect(await s.counts()).toEqual({ sessions: 1, docs: 3, removed: 0 });
  });

  it("each hit carries its own row's snippet", async () => {
    const s = shard("snippets");
    await s.ingest({
      key: "agent:t:a",
      sessionId: "s1",
      spawnedBy: null,
      docs: [doc(1, "first kiwi"), doc(2, "second kiwi"), doc(3, "third kiwi")],
    });
    const r = await find("snippets", "kiwi");
    expect(r.hits.map((h) => [h.seq, h.snippet]).sort()).toEqual([
      [1, "first kiwi"],
      [2, "second kiwi"],
      [3, "third kiwi"],
    ]);
  });

  it("a removed session stops matching at once, is purged in batches by the alarm, and a late push is dropped", async () => {
    const s = shard("purge");
    const key = "agent:t:big";
    for (let from = 0; from < 4500; from += 1500)
      await s.ingest({
        key,
        sessionId: "gen1",
        spawnedBy: null,
        docs: Array.from({ length: 1500 }, (_, i) => doc(from + i + 1, `mango ${from + i}`)),
      });
    await s.ingest({ key: "agent:t:other", sessionId: "o1", spawnedBy: null, docs: [doc(1, "mango other")] });
    await s.remove(key, "gen1");
    // Gone from results before its rows are: only the other session matches.
    expect((await find("purge", "mango")).hits.map((h) => h.key)).toEqual(["agent:t:other"]);
    // 2,000 rows per transaction: one batch in the call, the rest by the alarm.
    expect((await s.counts()).docs).toBe(2501);
    await runDurableObjectAlarm(s);
    expect((await s.counts()).docs).toBe(501);
    await runDurableObjectAlarm(s);
    expect(await s.counts()).toEqual({ sessions: 1, docs: 1, removed: 1 });
    // A push of the removed generation (in flight during the removal) is dropped; a new generation indexes.
    expect(await s.ingest({ key, sessionId: "gen1", spawnedBy: null, docs: [doc(9000, "mango late")] })).toEqual({
      indexed: 0,
    });
    expect(await s.ingest({ key, sessionId: "gen2", spawnedBy: null, docs: [doc(1, "mango again")] })).toEqual({
      indexed: 1,
    });
    expect((await find("purge", "mango")).hits.map((h) => `${h.key} ${h.sessionId}`).sort()).toEqual([
      "agent:t:big gen2",
      "agent:t:other o1",
    ]);
  });

  it("ranks only the newest matches past the cap, and says so", async () => {
    const s = shard("cap");
    const total = SEARCH_CANDIDATES_PER_SHARD + 200;
    await s.ingest({
      key: "agent:t:c",
      sessionId: "c1",
      spawnedBy: null,
      docs: Array.from({ length: total }, (_, i) => doc(i + 1, `papaya ${i}`)),
    });
    const r = await find("cap", "papaya", 25);
    expect(r.capped).toBe(true);
    expect(r.more).toBe(true);
    // All score alike: newest first, and none older than the newest SEARCH_CANDIDATES_PER_SHARD.
    expect(r.hits[0].seq).toBe(total);
    expect(Math.min(...r.hits.map((h) => h.seq))).toBeGreaterThan(total - SEARCH_CANDIDATES_PER_SHARD);
    expect((await find("cap", "papaya 5")).capped).toBe(false);
  });

  it("checks the scope exactly: tree is own and children, self is own, onlyKey is one session", async () => {
    const s = shard("scope");
    const me = "agent:t:me";
    await s.ingest({ key: me, sessionId: "m", spawnedBy: null, docs: [doc(1, "plum me")] });
    await s.ingest({ key: "agent:t:kid", sessionId: "k", spawnedBy: me, docs: [doc(1, "plum kid")] });
    await s.ingest({ key: "agent:t:x", sessionId: "x", spawnedBy: "agent:t:kid", docs: [doc(1, "plum x")] });
    const keys = async (scope: any, onlyKey?: string) =>
      (
        await s.search({
          match: matchExpression("plum")!,
          words: ["plum"],
          scope,
          limit: 10,
          ...(onlyKey ? { onlyKey } : {}),
        })
      ).hits
        .map((h) => h.key)
        .sort();
    expect(await keys({ type: "tree", key: me })).toEqual(["agent:t:kid", me]);
    expect(await keys({ type: "self", key: me })).toEqual([me]);
    expect(await keys(agentScope)).toEqual(["agent:t:kid", me, "agent:t:x"]);
    expect(await keys(agentScope, "agent:t:x")).toEqual(["agent:t:x"]);
    expect(await keys({ type: "tree", key: me }, "agent:t:x")).toEqual([]);
  });
});

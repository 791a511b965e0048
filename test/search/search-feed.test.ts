import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { parseCanonical } from "../../src/keys";
import { indexEntryOf } from "../../src/registry/row";
import { SEARCH_FEED_TIMER } from "../../src/search/feed";
import { searchShardFor } from "../../src/search/search-shards";
import { call, enc, sendAndWait, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import { rewindSchemaBefore } from "../helpers/schema-rewind";
import { assistantMsg, indexNow, search, seedSession, userMsg } from "../helpers/search";

const feedTimer = (key: string) =>
  runInDurableObject(sessionStub(key), (obj) => obj.timers.get(SEARCH_FEED_TIMER, "messages") ?? null);
const agentWide = () => setConfigOverride({ tools: { sessions: { visibility: "agent" } } });

describe("search feed", () => {
  it("the timer is written with the message: a crash before the push loses nothing, the alarm pushes it", async () => {
    const key = "agent:main:feed-crash";
    await sessionStub(key).ensureSession();
    // In the append's own transaction the timer row is there; moved an hour out (before the alarm is armed)
    // so no push can happen before the crash.
    const inTransaction = await runInDurableObject(sessionStub(key), (obj) => {
      const timer = obj.storage.transactionSync(() => {
        obj.transcript.append(userMsg("durablenumbat first"), null);
        return obj.timers.get(SEARCH_FEED_TIMER, "messages");
      });
      obj.sql.exec("UPDATE timers SET due_at = due_at + 3600000 WHERE kind = ?", SEARCH_FEED_TIMER);
      return timer;
    });
    expect(inTransaction).toMatchObject({ kind: SEARCH_FEED_TIMER, ref: "messages" });
    await crash(sessionStub(key));
    expect((await search({ query: "durablenumbat" }, key)).results).toEqual([]);
    // The hour passes: the alarm of the restarted object pushes it.
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.sql.exec("UPDATE timers SET due_at = 0 WHERE kind = ?", SEARCH_FEED_TIMER);
    });
    await runDurableObjectAlarm(sessionStub(key));
    const r = await search({ query: "durablenumbat" }, key);
    expect(r.results.map((x: any) => x.snippet)).toEqual(["durablenumbat first"]);
    expect(await feedTimer(key)).toBeNull();
  });

  it("a transcript written before the search feed existed is indexed after the migration, from its first message", async () => {
    const key = "agent:main:feed-pre-index";
    // 70 messages (more than one push) written by a version without the feed: no feed timer, no feed table,
    // nothing in the index.
    const texts = Array.from({ length: 70 }, (_, i) => `oldwombat ${i}`);
    await seedSession(
      key,
      texts.map((t, i) => (i % 2 ? assistantMsg(t) : userMsg(t))),
    );
    await runInDurableObject(sessionStub(key), async (obj, state) => {
      obj.sql.exec("DELETE FROM timers WHERE kind = ?", SEARCH_FEED_TIMER);
      await state.storage.deleteAlarm();
      rewindSchemaBefore(obj.sql, "CREATE TABLE search_feed");
    });
    expect((await searchShardFor(env, "main", key).counts()).docs).toBe(0);
    // The new version starts: the migration runs before the object serves anything and sets the feed's timer.
    await evict(sessionStub(key));
    expect(await feedTimer(key)).toMatchObject({ kind: SEARCH_FEED_TIMER, ref: "messages" });
    // The next message is accepted (the migration's timer is due "at once", 0, which the alarm must take) and
    // arms the alarm: it pushes the whole transcript in batches, oldest first, until every message is in.
    await sendAndWait(key, "newwombat");
    // (The alarm may also fire on its own meanwhile: it is due at once.)
    for (let i = 0; i < 5 && (await feedTimer(key)); i++) await runDurableObjectAlarm(sessionStub(key));
    expect(await feedTimer(key)).toBeNull();
    expect((await searchShardFor(env, "main", key).counts()).docs).toBe(72);
    const first = await search({ query: "oldwombat 0" }, key);
    expect(first.results[0]).toMatchObject({ sessionKey: key, role: "user", snippet: "oldwombat 0" });
    const last = await search({ query: "oldwombat 69" }, key);
    expect(last.results[0]).toMatchObject({ role: "assistant", snippet: "oldwombat 69" });
  });

  it("an old session that is only read after the migration is indexed by its alarm, with no new message", async () => {
    const key = "agent:main:feed-pre-index-read";
    await seedSession(key, [userMsg("readonlyquokka asks"), assistantMsg("readonlyquokka answers")]);
    await runInDurableObject(sessionStub(key), async (obj, state) => {
      obj.sql.exec("DELETE FROM timers WHERE kind = ?", SEARCH_FEED_TIMER);
      await state.storage.deleteAlarm();
      rewindSchemaBefore(obj.sql, "CREATE TABLE search_feed");
    });
    await evict(sessionStub(key));
    // The upgraded object's first call is a read: the migration writes the feed's timer and the object arms
    // its alarm for it before serving the read (src/session/session-object.ts).
    const history = await call("GET", `/v1/sessions/${enc(key)}/history`);
    expect(history.status).toBe(200);
    expect(history.json.messages).toHaveLength(2);
    // The alarm runs the feed (it may also have fired on its own: it is due at once, and its push may still be
    // in flight). Without the armed alarm nothing runs the timer and this times out.
    await runDurableObjectAlarm(sessionStub(key));
    await vi.waitFor(
      async () => {
        if (await feedTimer(key)) await runDurableObjectAlarm(sessionStub(key));
        expect(await feedTimer(key)).toBeNull();
      },
      { timeout: 5_000, interval: 20 },
    );
    const r = await search({ query: "readonlyquokka" }, key);
    expect(r.results.map((x: any) => [x.role, x.snippet])).toEqual(
      expect.arrayContaining([
        ["user", "readonlyquokka asks"],
        ["assistant", "readonlyquokka answers"],
      ]),
    );
    expect(r.results).toHaveLength(2);
  });

  it("pushes in batches until every message is in, then clears its timer", async () => {
    const key = "agent:main:feed-batches";
    await seedSession(
      key,
      Array.from({ length: 150 }, (_, i) => (i % 2 ? assistantMsg(`batchyak ${i}`) : userMsg(`batchyak ${i}`))),
    );
    // 64 per push: the timer stays due until every message is in (explicit pushes here; the alarm may help).
    const shard = searchShardFor(env, "main", key);
    for (let i = 0; i < 3; i++) await indexNow(key);
    expect(await feedTimer(key)).toBeNull();
    const r = await search({ query: "batchyak 149", limit: 25 }, key);
    expect(r.results[0].snippet).toBe("batchyak 149");
    expect((await shard.counts()).docs).toBeGreaterThanOrEqual(150);
    const meta = await sessionStub(key).getMeta();
    expect((await search({ query: "batchyak" }, key)).results.every((x: any) => x.sessionId === meta!.sessionId)).toBe(
      true,
    );
  });

  it("deleting a session removes its hits", async () => {
    const key = "agent:main:feed-delete";
    await seedSession(key, [userMsg("deletedpangolin here")]);
    await indexNow(key);
    agentWide();
    expect((await search({ query: "deletedpangolin" })).results).toHaveLength(1);
    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(200);
    expect((await search({ query: "deletedpangolin" })).results).toEqual([]);
  });

  it("archiving a session removes its hits (an archived transcript is not searched)", async () => {
    const key = "agent:main:subagent:feed-archive";
    await seedSession(key, [userMsg("archivedokapi here")], { spawnedBy: "agent:main:main", spawnDepth: 1 });
    await indexNow(key);
    agentWide();
    expect((await search({ query: "archivedokapi" })).results).toHaveLength(1);
    await runInDurableObject(sessionStub(key), async (obj) => {
      const entry = indexEntryOf(obj.meta!, parseCanonical(obj.meta!.key, obj.cfg));
      await obj.deleteSession({ archivedAs: { ...entry, listed: false } });
    });
    expect((await search({ query: "archivedokapi" })).results).toEqual([]);
  });

  it("indexes the first 16 KiB of a message's text; snippets are redacted and at most 300 characters", async () => {
    const key = "agent:main:feed-caps";
    // Six 4,000-character blocks: the text past 16 KiB is not searchable.
    const blocks = ["capstart", "b", "c", "d", "e", "capend"].map((w) => ({
      type: "text" as const,
      text: `${w} ${"x".repeat(3990)}`,
    }));
    const secret = "sk-abcdefghijklmnopqrstuvwx123456";
    await seedSession(key, [
      { role: "user", content: blocks, timestamp: Date.now() },
      userMsg(`tokenmarker ${secret} end`),
      userMsg(`longsnippet ${"word ".repeat(200)}`),
    ]);
    await indexNow(key);
    expect((await search({ query: "capstart" }, key)).results).toHaveLength(1);
    expect((await search({ query: "capend" }, key)).results).toEqual([]);
    const tok = (await search({ query: "tokenmarker" }, key)).results[0];
    expect(tok.snippet).not.toContain(secret);
    expect(tok.snippet).toMatch(/^tokenmarker sk-abc…3456 end$/);
    expect((await search({ query: secret }, key)).results).toEqual([]);
    const long = (await search({ query: "longsnippet" }, key)).results[0].snippet;
    expect(long.length).toBeLessThanOrEqual(300);
    expect(long.startsWith("longsnippet word word")).toBe(true);
    expect(long.endsWith("…")).toBe(true);
  });
});

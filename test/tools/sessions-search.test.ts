import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { SEARCH_CANDIDATES_PER_SHARD } from "../../src/search/search-index-object";
import { searchShardOf } from "../../src/search/search-shards";
import { SEARCH_CAPPED_WARNING, SEARCH_DEFAULT_LIMIT, SEARCH_RESULT_MAX_BYTES } from "../../src/tools/sessions-search";
import { invoke, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";
import { assistantMsg, indexNow, search, seedSession, userMsg } from "../helpers/search";

const ME = "agent:main:main";
const agents = [{ id: "main", default: true }, { id: "research" }];
const cfg = (tools: Record<string, unknown>, defaults?: Record<string, unknown>) =>
  setConfigOverride({ tools, agents: { ...(defaults ? { defaults } : {}), list: agents } });

describe("sessions_search: results", () => {
  it("finds user and assistant text with the documented row shape, and reopens at the hit with sessions_history", async () => {
    const key = "agent:main:search-shape";
    const t0 = Date.UTC(2026, 10, 1);
    const [, , seq] = await seedSession(key, [
      userMsg("before the hit", t0),
      assistantMsg("still before", t0 + 1),
      userMsg("where did the walrusberry go", t0 + 2),
      assistantMsg("the walrusberry went north", t0 + 3),
      userMsg("after the hit", t0 + 4),
    ]);
    await indexNow(key);
    const meta = await sessionStub(key).getMeta();
    const r = await search({ query: "walrusberry" }, key);
    expect(r.truncated).toBeUndefined();
    expect(r.warning).toBeUndefined();
    expect(r.results).toHaveLength(2);
    for (const row of r.results) {
      expect(Object.keys(row)).toEqual([
        "sessionKey",
        "timestamp",
        "role",
        "snippet",
        "score",
        "sessionId",
        "messageId",
      ]);
      expect(row.sessionKey).toBe(key);
      expect(row.sessionId).toBe(meta!.sessionId);
      expect(row.score).toBeGreaterThan(0);
    }
    const user = r.results.find((x: any) => x.role === "user");
    expect(user).toMatchObject({ timestamp: t0 + 2, snippet: "where did the walrusberry go", messageId: String(seq) });
    expect(r.results.find((x: any) => x.role === "assistant").snippet).toBe("the walrusberry went north");

    // The hit's fields reopen the transcript there: the message, then newer and older in turn.
    const h = await invoke(
      "sessions_history",
      { sessionKey: user.sessionKey, messageId: user.messageId, sessionId: user.sessionId, limit: 3 },
      { sessionKey: key },
    );
    expect(h.details.messages.map((m: any) => m.content[0].text)).toEqual([
      "still before",
      "where did the walrusberry go",
      "the walrusberry went north",
    ]);
    expect(h.details.hasMore).toBe(true);
    expect(h.details.nextBefore).toBe(seq - 1);
    // A message that is not there is an empty page, never the tail; a replaced generation is refused.
    const missing = await invoke("sessions_history", { sessionKey: key, messageId: "999999" }, { sessionKey: key });
    expect(missing.details.messages).toEqual([]);
    expect(
      (await invoke("sessions_history", { sessionKey: key, messageId: "1", sessionId: "not-it" }, { sessionKey: key }))
        .details,
    ).toEqual({ status: "error", error: `sessionId not-it is not the current session of ${key}` });
    const noAnchor = await invoke(
      "sessions_history",
      { sessionKey: key, sessionId: meta!.sessionId },
      { sessionKey: key },
    );
    expect(noAnchor.status).toBe(400);
    expect(noAnchor.body.error.message).toBe("sessionId requires messageId");
  });

  it("indexes what a run writes (its user message and reply), never tool results or thinking", async () => {
    const key = "agent:main:search-run";
    await sendAndWait(key, "the run says quokkanote");
    await runInDurableObject(sessionStub(key), (obj) =>
      obj.storage.transactionSync(() => {
        obj.transcript.append(
          {
            role: "toolResult",
            toolCallId: "c1",
            toolName: "x",
            content: [{ type: "text", text: "toolonlyword" }],
            isError: false,
            timestamp: Date.now(),
          },
          null,
        );
        obj.transcript.append(
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "thinkonlyword" },
              { type: "text", text: "visible" },
            ],
            api: "t",
            provider: "t",
            model: "t",
            stopReason: "stop",
            timestamp: Date.now(),
          },
          null,
        );
      }),
    );
    await indexNow(key);
    const r = await search({ query: "quokkanote" }, key);
    expect(r.results.map((x: any) => x.role).sort()).toEqual(["assistant", "user"]);
    expect((await search({ query: "toolonlyword" }, key)).results).toEqual([]);
    expect((await search({ query: "thinkonlyword" }, key)).results).toEqual([]);
  });

  it("orders by score, then newest, then key, then message; limit cuts with truncated", async () => {
    const a = "agent:main:search-rank-a";
    // Scores are bm25 within one shard (its own corpus statistics, docs/search.md): b shares a's shard so
    // equal texts score equally and the tie-breaks show.
    const b = Array.from({ length: 64 }, (_, i) => `agent:main:search-rank-b${i}`).find(
      (k) => searchShardOf(k) === searchShardOf(a),
    )!;
    const t = Date.UTC(2026, 10, 2);
    // Dense hits score higher than a hit in a long message (bm25).
    await seedSession(a, [
      userMsg("rankword", t),
      userMsg(`rankword ${"filler ".repeat(60)}`, t + 5),
      userMsg("rankword", t + 9),
    ]);
    await seedSession(b, [userMsg("rankword", t + 9)]);
    await indexNow(a, b);
    setConfigOverride({ tools: { sessions: { visibility: "agent" } } });
    const r = await search({ query: "rankword" });
    const order = r.results.map((x: any) => [x.sessionKey, x.timestamp]);
    // The three short ones tie on score: newest first, then key; the long one last.
    expect(order).toEqual([
      [a, t + 9],
      [b, t + 9],
      [a, t],
      [a, t + 5],
    ]);
    expect(r.results[0].score).toBeCloseTo(r.results[2].score, 9);
    expect(r.results[3].score).toBeLessThan(r.results[2].score);
    const cut = await search({ query: "rankword", limit: 2 });
    expect(cut.results.map((x: any) => x.sessionKey)).toEqual([a, b]);
    expect(cut.truncated).toBe(true);
  });

  it("every word must appear; operators, quotes, prefixes and column names are words, not syntax", async () => {
    const key = "agent:main:search-literal";
    await seedSession(key, [
      userMsg("alpha OR beta"),
      userMsg("alpha NOT gamma"),
      userMsg('say "hello" to body:x and prefix* now'),
      userMsg("alphabet soup"),
    ]);
    await indexNow(key);
    const texts = async (query: string) =>
      ((await search({ query }, key)).results as any[]).map((x) => x.snippet).sort();
    expect(await texts("alpha")).toEqual(["alpha NOT gamma", "alpha OR beta"]);
    expect(await texts("alpha gamma")).toEqual(["alpha NOT gamma"]);
    // `OR` is a word that must appear; not an alternative.
    expect(await texts("beta OR gamma")).toEqual([]);
    expect(await texts("NOT gamma")).toEqual(["alpha NOT gamma"]);
    // `alp*` is the word "alp", not a prefix; a quote and a column filter are literal too.
    expect(await texts("alp*")).toEqual([]);
    expect(await texts('"hello')).toEqual(['say "hello" to body:x and prefix* now']);
    expect(await texts("body:x")).toEqual(['say "hello" to body:x and prefix* now']);
    expect(await texts("vis:x")).toEqual([]);
    // Punctuation alone has no word to match.
    expect((await search({ query: "!!! ---" }, key)).results).toEqual([]);
  });

  it("folds case and diacritics both ways", async () => {
    const key = "agent:main:search-fold";
    await seedSession(key, [userMsg("Crème Brûlée at the Café"), userMsg("plain creme caramel")]);
    await indexNow(key);
    expect((await search({ query: "creme brulee" }, key)).results.map((x: any) => x.snippet)).toEqual([
      "Crème Brûlée at the Café",
    ]);
    expect((await search({ query: "CRÈME" }, key)).results).toHaveLength(2);
    expect((await search({ query: "cafe" }, key)).results).toHaveLength(1);
  });
});

describe("sessions_search: parameters", () => {
  it("refuses bad input with the documented texts", async () => {
    const bad = async (args: Record<string, unknown>) => search(args);
    expect(await bad({})).toEqual({ httpStatus: 400, message: "query must not be empty" });
    expect(await bad({ query: "   " })).toEqual({ httpStatus: 400, message: "query must not be empty" });
    expect(await bad({ query: "x".repeat(4097) })).toEqual({
      httpStatus: 400,
      message: "query must not exceed 4096 characters",
    });
    for (const limit of [0, 26, 1.5, -1])
      expect(await bad({ query: "x", limit })).toEqual({
        httpStatus: 400,
        message: "limit must be a positive integer",
      });
    expect(await bad({ query: "x", offset: 1 })).toEqual({
      httpStatus: 400,
      message: "offset: unknown parameter for sessions_search",
    });
    // At the bounds: accepted.
    expect((await search({ query: "x".repeat(4096), limit: 25 })).results).toEqual([]);
    // 2,048 words of one letter (the most a 4,096-character query holds) and a quote-only word: no FTS5 syntax error.
    expect((await search({ query: "a ".repeat(2048) })).results).toEqual([]);
    expect((await search({ query: '" "" """ a"b' })).results).toEqual([]);
    expect((await search({ query: "nothingmatchesthis", limit: 1, session_key: ME })).results).toEqual([]);
  });
});

describe("sessions_search: limits", () => {
  it("limit defaults to 10: the 10 best of 12 hits, with truncated", async () => {
    const key = "agent:main:search-default-limit";
    await seedSession(
      key,
      Array.from({ length: 12 }, (_, i) => userMsg(`defaultlimitword ${i}`, i + 1)),
    );
    await indexNow(key);
    const r = await search({ query: "defaultlimitword" }, key);
    expect(SEARCH_DEFAULT_LIMIT).toBe(10);
    expect(r.results).toHaveLength(10);
    expect(r.truncated).toBe(true);
    // Equal scores: the newest ten.
    expect(r.results.map((x: any) => x.timestamp)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
  });

  it("cuts the result to 32 KiB of JSON from its end, with truncated", async () => {
    // 25 hits of a 500-character key, each snippet 300 characters of three-byte text: about 37 KB in all.
    const key = `agent:main:search-budget-${"k".repeat(475)}`;
    const wide = Array.from({ length: 100 }, () => "漢字漢字漢字漢字漢字").join(" ");
    await seedSession(
      key,
      Array.from({ length: 25 }, (_, i) => userMsg(`budgetword ${wide}`, i + 1)),
    );
    await indexNow(key);
    const r = await search({ query: "budgetword", limit: 25 }, key);
    const bytes = new TextEncoder().encode(JSON.stringify(r)).length;
    const row = new TextEncoder().encode(JSON.stringify(r.results[0])).length;
    expect(row).toBeGreaterThan(1_300);
    expect(r.truncated).toBe(true);
    expect(r.results.length).toBeLessThan(25);
    // Within the budget, and another row would not have fitted; the rows kept are the best (here: newest).
    expect(bytes).toBeLessThanOrEqual(SEARCH_RESULT_MAX_BYTES);
    expect(bytes + row + 1).toBeGreaterThan(SEARCH_RESULT_MAX_BYTES);
    expect(r.results.map((x: any) => x.timestamp)).toEqual(Array.from({ length: r.results.length }, (_, i) => 25 - i));
  });
});

describe("sessions_search: visibility inside the query", () => {
  /** A fresh tree per test (storage outlives a test): me, my child, its child, a stranger, another agent's session. */
  async function setup(tag: string) {
    const t = {
      word: `vismarker${tag}`,
      me: `agent:main:search-vis-${tag}`,
      child: `agent:main:subagent:search-vis-${tag}-child`,
      grandchild: `agent:main:subagent:search-vis-${tag}-grandchild`,
      stranger: `agent:main:discord:direct:search-vis-${tag}`,
      theirs: `agent:research:search-vis-${tag}`,
    };
    await seedSession(t.me, [userMsg(`${t.word} mine`)]);
    await seedSession(t.child, [userMsg(`${t.word} child`)], { spawnedBy: t.me, spawnDepth: 1 });
    await seedSession(t.grandchild, [userMsg(`${t.word} grandchild`)], { spawnedBy: t.child, spawnDepth: 2 });
    await seedSession(t.stranger, [userMsg(`${t.word} stranger`)]);
    await seedSession(t.theirs, [userMsg(`${t.word} research`)]);
    await indexNow(t.me, t.child, t.grandchild, t.stranger, t.theirs);
    const keys = async (args: Record<string, unknown> = {}, caller = t.me) =>
      ((await search({ query: t.word, ...args }, caller)).results as any[]).map((x) => x.sessionKey).sort();
    return { ...t, keys };
  }

  it("tree (default): own session and direct children only, also for an orchestrator child", async () => {
    const t = await setup("tree");
    expect(await t.keys()).toEqual([t.me, t.child].sort());
    setConfigOverride({ agents: { defaults: { subagents: { maxSpawnDepth: 2 } }, list: agents } });
    expect(await t.keys({}, t.child)).toEqual([t.child, t.grandchild].sort());
  });

  it("self, agent and all: own, the agent's, and other agents' as agentToAgent allows", async () => {
    const t = await setup("modes");
    cfg({ sessions: { visibility: "self" } });
    expect(await t.keys()).toEqual([t.me]);
    const agentWide = [t.me, t.child, t.grandchild, t.stranger].sort();
    cfg({ sessions: { visibility: "agent" } });
    expect(await t.keys()).toEqual(agentWide);
    cfg({ sessions: { visibility: "all" } });
    expect(await t.keys()).toEqual(agentWide);
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "research"] } });
    expect(await t.keys()).toEqual([...agentWide, t.theirs].sort());
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main"] } });
    expect(await t.keys()).toEqual(agentWide);
  });

  it("a sandboxed caller sees only its own session and what it spawned, whatever the configured visibility", async () => {
    const t = await setup("sandbox");
    cfg({ sessions: { visibility: "all" }, agentToAgent: { enabled: true } }, { sandbox: { mode: "all" } });
    expect(await t.keys()).toEqual([t.me, t.child].sort());
    expect(await search({ query: t.word, sessionKey: t.stranger }, t.me)).toEqual({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${t.stranger}`,
    });
  });

  it("sessionKey restricts to one visible session and refuses others with the search texts", async () => {
    const t = await setup("onekey");
    expect(await t.keys({ sessionKey: t.child })).toEqual([t.child]);
    expect(await t.keys({ sessionKey: "current" })).toEqual([t.me]);
    // A sessionId names its session as the key does.
    const childId = (await sessionStub(t.child).getMeta())!.sessionId;
    expect(await t.keys({ sessionKey: childId })).toEqual([t.child]);
    const tree = {
      status: "forbidden",
      error: "Session search visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    };
    expect(await search({ query: t.word, sessionKey: t.stranger }, t.me)).toEqual(tree);
    expect(await search({ query: t.word, sessionKey: t.grandchild }, t.me)).toEqual(tree);
    expect(await search({ query: t.word, sessionKey: t.theirs }, t.me)).toEqual({
      status: "forbidden",
      error:
        "Session search visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.",
    });
    cfg({ sessions: { visibility: "all" } });
    expect(await search({ query: t.word, sessionKey: t.theirs }, t.me)).toEqual({
      status: "forbidden",
      error: "Agent-to-agent search is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
    });
    cfg({ sessions: { visibility: "self" } });
    expect(await search({ query: t.word, sessionKey: t.child }, t.me)).toEqual({
      status: "forbidden",
      error: "Session search visibility is restricted to the current session (tools.sessions.visibility=self).",
    });
    // `main` is the caller's agent's main session: outside a non-main caller's tree, searchable under `agent`.
    await seedSession(ME, [userMsg(`${t.word} main`)]);
    await indexNow(ME);
    cfg({ sessions: { visibility: "tree" } });
    expect(await search({ query: t.word, sessionKey: "main" }, t.me)).toEqual(tree);
    cfg({ sessions: { visibility: "agent" } });
    expect(await t.keys({ sessionKey: "main" }, t.stranger)).toEqual([ME]);
  });

  it("an agent token searches as its agent: the other agent's sessions stay out", async () => {
    const t = await setup("token");
    const r = await invoke("sessions_search", { query: t.word }, { token: RESEARCH_TOKEN, sessionKey: t.theirs });
    expect(r.details.results.map((x: any) => x.sessionKey)).toEqual([t.theirs]);
  });

  it("isolated cron run sessions are never indexed", async () => {
    const run = "agent:main:cron:nightly:run:r1";
    await seedSession(run, [userMsg("cronsecretword")]);
    await indexNow(run);
    cfg({ sessions: { visibility: "agent" } });
    expect((await search({ query: "cronsecretword" })).results).toEqual([]);
  });
});

describe("sessions_search: the cap warning", () => {
  it("says truncated with a warning when a shard reached its candidate cap", async () => {
    // One session, more matches than its shard ranks (SEARCH_CANDIDATES_PER_SHARD): only the newest are.
    const key = "agent:main:search-cap";
    await seedSession(
      key,
      Array.from({ length: SEARCH_CANDIDATES_PER_SHARD + 1 }, (_, i) => userMsg(`capword ${i}`, i + 1)),
    );
    for (let i = 0; i < 20; i++) await indexNow(key);
    const r = await search({ query: "capword", limit: 3 }, key);
    expect(r.truncated).toBe(true);
    expect(r.warning).toBe(SEARCH_CAPPED_WARNING);
    expect(r.results).toHaveLength(3);
    // Equal scores: the newest first.
    expect(r.results.map((x: any) => x.timestamp)).toEqual(
      [501, 500, 499].map((t) => t + SEARCH_CANDIDATES_PER_SHARD - 500),
    );
  });
});

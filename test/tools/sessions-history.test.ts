import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { sessionIndex } from "../../src/registry/session-index";
import type { TranscriptMessage } from "../../src/session/types";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";

/** Read as `sessionKey` (by default the target itself, which every visibility mode allows). */
const history = (args: Record<string, unknown>, sessionKey = String(args.sessionKey)) =>
  invoke("sessions_history", args, { sessionKey });

/** Create a session (one echo run) and append raw transcript messages to it. */
async function seedTranscript(
  key: string,
  messages: (i: number) => TranscriptMessage | Record<string, unknown>,
  count: number,
  init?: Record<string, unknown>,
) {
  if (init) await sessionStub(key).ensureSession(init);
  else await sessionStub(key).ensureSession();
  await runInDurableObject(sessionStub(key), (obj) => {
    for (let i = 1; i <= count; i++) obj.transcript.append(messages(i) as TranscriptMessage, null);
  });
}
const user = (text: string) => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 }) as TranscriptMessage;

describe("sessions_history", () => {
  it("drops toolResult messages unless includeTools — tool results from a real tool call in a run", async () => {
    useFakeProvider({
      auto: (c) =>
        (c.body.messages as any[]).some((m) => m.role === "tool")
          ? c.reply("listed them")
          : c.toolCall("sessions_list", { limit: 1 }),
    });
    const key = "agent:main:hist-tools";
    const run = await sendAndWait(key, "what sessions exist?");
    expect(run).toMatchObject({ status: "ok", reply: "listed them" });
    const plain = await history({ sessionKey: key }, key);
    expect(plain.status).toBe(200);
    expect(plain.details.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "assistant"]);
    expect(plain.details.messages[1].content[0]).toMatchObject({
      type: "toolCall",
      name: "sessions_list",
      arguments: { limit: 1 },
    });
    const withTools = await history({ sessionKey: key, includeTools: true }, key);
    expect(withTools.details.messages.map((m: any) => m.role)).toEqual([
      "user",
      "assistant",
      "toolResult",
      "assistant",
    ]);
    const tr = withTools.details.messages[2];
    expect(tr).toMatchObject({ role: "toolResult", toolName: "sessions_list", isError: false });
    expect(JSON.parse(tr.content[0].text)).toMatchObject({ count: 1, sessions: [expect.objectContaining({ key })] });
    // List previews never show tool results either.
    const row = (await invoke("sessions_list", { messageLimit: 20 }, { sessionKey: key })).details.sessions.find(
      (s: any) => s.key === key,
    );
    expect(row.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "assistant"]);
  });

  it("the result shape; limit defaults to 50 and is clamped to 1000", async () => {
    const key = "agent:main:hist-clamp";
    // Tiny messages so the 80 KB byte cap does not interfere with the count.
    await seedTranscript(key, (i) => ({ role: "user", content: `${i}`, timestamp: 1 }), 1005);
    const def = await history({ sessionKey: key });
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    expect(def.details).toEqual({
      sessionKey: key,
      sessionId,
      messages: expect.any(Array),
      truncated: false,
      droppedMessages: false,
      contentTruncated: false,
      contentRedacted: false,
      bytes: expect.any(Number),
      hasMore: true,
      nextBefore: 956,
    });
    expect(def.details.messages).toHaveLength(50);
    expect(def.details.messages[0]).toEqual({
      role: "user",
      content: "956",
      timestamp: 1,
      __switchboard: { seq: 956 },
    });
    const max = await history({ sessionKey: key, limit: 5000 });
    expect(max.details.messages).toHaveLength(1000);
    expect(max.details.droppedMessages).toBe(false);
    expect(max.details.nextBefore).toBe(6);
    expect((await history({ sessionKey: key, limit: 2.9 })).details.messages).toHaveLength(2);
    expect((await history({ sessionKey: key, limit: 0 })).status).toBe(400);
  });

  it("the `before` cursor reaches every message of a long transcript, even when the byte cap drops messages", async () => {
    const key = "agent:main:hist-cursor";
    await seedTranscript(key, (i) => user(`${i}:${"x".repeat(3000)}`), 260);
    const seen: number[] = [];
    let before: number | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const r = await history({ sessionKey: key, limit: 40, ...(before ? { before } : {}) });
      expect(r.status).toBe(200);
      expect(r.details.bytes).toBeLessThanOrEqual(80 * 1024);
      seen.unshift(...r.details.messages.map((m: any) => m.__switchboard.seq));
      if (!r.details.hasMore) {
        expect(r.details.nextBefore).toBeNull();
        break;
      }
      before = r.details.nextBefore;
    }
    expect(seen).toEqual(Array.from({ length: 260 }, (_, i) => i + 1));
  });

  it("an anchored page and a plain page measure heads alike: the budget that fits k newest heads fits them both", async () => {
    const key = "agent:main:hist-anchor-measure";
    await seedTranscript(key, (i) => user(`m${i}:${"z".repeat(40)}`), 8);
    await runInDurableObject(sessionStub(key), (obj) => {
      const plain = (maxBytes: number) => obj.transcript.page({ limit: 8, includeTools: false, maxBytes });
      // The smallest budget that still holds the newest 5 on a plain page is cut to 4 by one byte less.
      let fit = 1;
      while (plain(fit).messages.length < 5) fit++;
      const around = (maxBytes: number) =>
        obj.transcript.pageAround({ anchor: 8, limit: 8, includeTools: false, maxBytes }).messages.length;
      expect([around(fit), around(fit - 1)]).toEqual([5, 4]);
    });
  });

  it("messageId reads around one message: newer and older in turn, within limit and the byte budget", async () => {
    const key = "agent:main:hist-anchor";
    await seedTranscript(key, (i) => user(`m${i}`), 10);
    const seqs = async (args: Record<string, unknown>) => {
      const r = await history({ sessionKey: key, ...args });
      return r.details.messages.map((m: any) => m.__switchboard.seq);
    };
    expect(await seqs({ messageId: "5", limit: 4 })).toEqual([4, 5, 6, 7]);
    expect(await seqs({ messageId: "5", limit: 1 })).toEqual([5]);
    // Near the end, the rest of the page comes from older messages.
    expect(await seqs({ messageId: "10", limit: 3 })).toEqual([8, 9, 10]);
    const page = await history({ sessionKey: key, messageId: "5", limit: 3 });
    expect(page.details).toMatchObject({ hasMore: true, nextBefore: 4 });
    // Not a message of this session: an empty page, never the newest messages.
    expect(await seqs({ messageId: "11" })).toEqual([]);
    expect(await seqs({ messageId: "abc" })).toEqual([]);
    // Large messages: the budget stops the growth, the anchor is always there.
    const big = "agent:main:hist-anchor-big";
    await seedTranscript(big, (i) => user(`${i}:${"y".repeat(3500)}`), 60);
    const r = await history({ sessionKey: big, messageId: "30", limit: 60 });
    expect(r.details.bytes).toBeLessThanOrEqual(80 * 1024);
    const got = r.details.messages.map((m: any) => m.__switchboard.seq);
    expect(got).toContain(30);
    expect(got.length).toBeLessThan(60);
    expect(
      Math.abs(got.filter((s: number) => s > 30).length - got.filter((s: number) => s < 30).length),
    ).toBeLessThanOrEqual(1);
    expect(r.details.truncated).toBe(true);
    for (const bad of [{ before: 3 }, { offset: 1 }]) {
      const e = await history({ sessionKey: key, messageId: "5", ...bad });
      expect(e.status).toBe(400);
      expect(e.body.error.message).toBe("messageId: not with before or offset (an anchored read is its own page)");
    }
  });

  it("80 oversized messages: truncated, dropped, capped at 80 KB, opaque fields removed", async () => {
    const key = "agent:main:hist-oversized";
    await seedTranscript(
      key,
      (i) => ({
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", thinkingSignature: "sig" },
          { type: "text", text: `${i} ${"y".repeat(5000)}` },
        ],
        api: "x",
        provider: "p",
        model: "m",
        usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2 },
        details: { big: true },
        stopReason: "stop",
        timestamp: 1,
      }),
      80,
    );
    const r = await history({ sessionKey: key, limit: 200 });
    expect(r.details).toMatchObject({
      truncated: true,
      droppedMessages: true,
      contentTruncated: true,
      contentRedacted: false,
      hasMore: true,
    });
    expect(r.details.bytes).toBeLessThanOrEqual(81_920);
    expect(r.details.messages.length).toBeLessThan(80);
    for (const m of r.details.messages) {
      expect(m.details).toBeUndefined();
      expect(m.usage).toBeUndefined();
      expect(m.content[0].thinkingSignature).toBeUndefined();
      expect(m.content[1].text.length).toBeLessThanOrEqual(4015);
      expect(m.content[1].text.endsWith("\n…(truncated)…")).toBe(true);
    }
  });

  it("one message with a 200 KB field → the single placeholder", async () => {
    const key = "agent:main:hist-huge";
    await seedTranscript(
      key,
      () => ({ role: "user", content: [{ type: "text", text: "hi" }], extra: "z".repeat(200_000), timestamp: 1 }),
      1,
    );
    const r = await history({ sessionKey: key });
    expect(r.details.messages).toHaveLength(1);
    expect(JSON.stringify(r.details.messages[0])).toContain("[sessions_history omitted: message too large]");
    expect(r.details).toMatchObject({ contentTruncated: false, truncated: true });
  });

  it("secrets are redacted and long texts with secrets are both redacted and truncated", async () => {
    const key = "agent:main:hist-secret";
    await seedTranscript(key, () => user("my key is sk-1234567890abcdef1234 ok"), 1);
    const r = await history({ sessionKey: key });
    expect(r.details).toMatchObject({ contentRedacted: true, truncated: false, contentTruncated: false });
    expect(r.details.messages[0].content[0].text).not.toContain("sk-1234567890abcdef1234");
    expect(r.details.messages[0].content[0].text).toContain("sk-123…1234");

    const key2 = "agent:main:hist-secret-long";
    await seedTranscript(key2, () => user(`token sk-1234567890abcdef1234 ${"w".repeat(6000)}`), 1);
    const r2 = await history({ sessionKey: key2 });
    expect(r2.details).toMatchObject({ contentRedacted: true, contentTruncated: true, truncated: true });
  });

  it("a well-formed key that does not exist reads as empty, and creates nothing", async () => {
    const r = await history({ sessionKey: "agent:main:hist-never" });
    expect(r.details).toMatchObject({
      sessionKey: "agent:main:hist-never",
      messages: [],
      hasMore: false,
      nextBefore: null,
    });
    expect(r.details.sessionId).toBeUndefined();
    expect((await call("GET", `/v1/sessions/${enc("agent:main:hist-never")}`)).status).toBe(404);
  });
});

describe("sessionKey resolution", () => {
  it("a sessionId from sessions_list resolves to its session", async () => {
    const key = "agent:main:hist-by-id";
    await sendAndWait(key, "find me by id");
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    const r = await history({ sessionKey: sessionId }, key);
    expect(r.details.sessionKey).toBe(key);
    expect(r.details.messages[0].content[0].text).toBe("find me by id");
    // Upper-case ids work too.
    expect((await history({ sessionKey: sessionId.toUpperCase() }, key)).details.sessionKey).toBe(key);
  });

  it("an unknown sessionId or slug → the spec's Session not found text", async () => {
    const id = "0b7c1f7e-8c51-4b5c-9d6a-000000000000";
    expect((await history({ sessionKey: id })).details).toEqual({
      status: "error",
      error: `Session not found: ${id} (use the full sessionKey from sessions_list)`,
    });
    expect((await history({ sessionKey: "random-slug" })).details).toEqual({
      status: "error",
      error: "Session not found: random-slug (use the full sessionKey from sessions_list)",
    });
  });

  it("a custom key resolves through the registry", async () => {
    await sendAndWait("sess-group", "custom keyed");
    const r = await history({ sessionKey: "sess-group" }, "agent:main:main");
    // The operator acts as agent:main:main under tree visibility; the custom session is not its child.
    expect(r.details).toEqual({
      status: "forbidden",
      error: "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    const own = await history({ sessionKey: "sess-group" }, "agent:main:sess-group");
    expect(own.details.sessionKey).toBe("agent:main:sess-group");
    expect(own.details.messages[0].content[0].text).toBe("custom keyed");
  });

  it("a sessionId of another agent's session resolves across shards (then visibility and agent-to-agent apply)", async () => {
    const key = "agent:research:hist-cross";
    await sendAndWait(key, "research notes", {}, { token: RESEARCH_TOKEN });
    const sessionId = (await call("GET", `/v1/sessions/${enc(key)}`)).json.sessionId;
    setConfigOverride({
      tools: { sessions: { visibility: "all" } },
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
    });
    expect((await history({ sessionKey: sessionId }, "agent:main:main")).details).toEqual({
      status: "forbidden",
      error: "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
    });
    setConfigOverride({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
    });
    const ok = await history({ sessionKey: sessionId }, "agent:main:main");
    expect(ok.details.sessionKey).toBe(key);
    expect(ok.details.messages[0].content[0].text).toBe("research notes");
  });

  it("`current` is the requester's own session, also when sandboxed", async () => {
    await sendAndWait("agent:main:hist-current", "me");
    expect((await history({ sessionKey: "current" }, "agent:main:hist-current")).details.sessionKey).toBe(
      "agent:main:hist-current",
    );
    setConfigOverride({
      agents: { defaults: { sandbox: { mode: "all" } }, list: [{ id: "main", default: true }, { id: "research" }] },
    });
    expect((await history({ sessionKey: "current" }, "agent:main:hist-current")).details.messages).toHaveLength(2);
  });
});

describe("sessions_history visibility", () => {
  const me = "agent:main:hist-vis-me";
  const child = "agent:main:subagent:hist-vis-child";
  const stranger = "agent:main:discord:direct:someone-else";

  async function setup() {
    await sendAndWait(me, "me");
    await sendAndWait(stranger, "private");
    await sessionStub(child).ensureSession({ spawnedBy: me, spawnDepth: 1 });
    await sendAndWait("agent:research:hist-vis", "theirs", {}, { token: RESEARCH_TOKEN });
  }
  const cfg = (extra: Record<string, unknown>) =>
    setConfigOverride({
      ...extra,
      agents: { ...((extra.agents as object) ?? {}), list: [{ id: "main", default: true }, { id: "research" }] },
    });

  it("tree (default): another session of the agent is forbidden, an own child is allowed", async () => {
    await setup();
    expect((await history({ sessionKey: stranger }, me)).details).toEqual({
      status: "forbidden",
      error: "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    expect((await history({ sessionKey: child }, me)).details.sessionKey).toBe(child);
    expect((await history({ sessionKey: "agent:research:hist-vis" }, me)).details).toEqual({
      status: "forbidden",
      error: "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
    });
  });

  it("self: own key allowed, anything else forbidden with the exact text", async () => {
    await setup();
    cfg({ tools: { sessions: { visibility: "self" } } });
    expect((await history({ sessionKey: me }, me)).details.sessionKey).toBe(me);
    for (const target of ["agent:main:telegram:group:1", child]) {
      expect((await history({ sessionKey: target }, me)).details).toEqual({
        status: "forbidden",
        error: "Session history visibility is restricted to the current session (tools.sessions.visibility=self).",
      });
    }
  });

  it('agent and all ("ALL" is case-insensitive) allow same-agent others; cross-agent needs agentToAgent', async () => {
    await setup();
    cfg({ tools: { sessions: { visibility: "agent" } } });
    expect((await history({ sessionKey: stranger }, me)).details.messages[0].content[0].text).toBe("private");
    cfg({ tools: { sessions: { visibility: "ALL" } } });
    expect((await history({ sessionKey: stranger }, me)).details.sessionKey).toBe(stranger);
    cfg({ tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "ops-*"] } } });
    expect((await history({ sessionKey: "agent:research:hist-vis" }, me)).details).toEqual({
      status: "forbidden",
      error: "Agent-to-agent history denied by tools.agentToAgent.allow.",
    });
    cfg({ tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["main", "research"] } } });
    expect((await history({ sessionKey: "agent:research:hist-vis" }, me)).details.messages[0].content[0].text).toBe(
      "theirs",
    );
    cfg({ tools: { sessions: { visibility: "bogus" } } });
    expect((await history({ sessionKey: stranger }, me)).details.status).toBe("forbidden");
  });

  it("sandboxed + clamp spawned: cross-agent forbidden even with allow [*]; own child allowed; strangers not visible", async () => {
    await setup();
    cfg({
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      agents: { defaults: { sandbox: { mode: "all" } } },
    });
    expect((await history({ sessionKey: "agent:research:hist-vis" }, me)).details).toEqual({
      status: "forbidden",
      error: "Session not visible from this sandboxed agent session: agent:research:hist-vis",
    });
    expect((await history({ sessionKey: stranger }, me)).details).toEqual({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${stranger}`,
    });
    expect((await history({ sessionKey: child }, me)).details.sessionKey).toBe(child);
    const strangerId = (await call("GET", `/v1/sessions/${enc(stranger)}`)).json.sessionId;
    expect((await history({ sessionKey: strangerId }, me)).details).toEqual({
      status: "forbidden",
      error: `Session not visible from this sandboxed agent session: ${strangerId}`,
    });
    const childId = (await call("GET", `/v1/sessions/${enc(child)}`)).json.sessionId;
    expect((await history({ sessionKey: childId }, me)).details.sessionKey).toBe(child);
  });

  it("a spawned child is visible however many children the requester has", async () => {
    const parent = "agent:main:hist-many-parent";
    await sendAndWait(parent, "p");
    await runInDurableObject(sessionStub(parent), async () => {});
    // 600 other children in the index, newer than the one we read.
    const { env } = await import("cloudflare:workers");
    const { indexEntryOf } = await import("../../src/registry/row");
    const { parseCanonical } = await import("../../src/keys");
    const { loadConfig } = await import("../../src/config/load");
    const c = loadConfig(env);
    const oldChild = "agent:main:subagent:hist-many-old";
    await sessionStub(oldChild).ensureSession({ spawnedBy: parent });
    await sendAndWait(oldChild, "old child speaks");
    const now = Date.now() + 1000;
    const entries = Array.from({ length: 600 }, (_, i) => {
      const k = `agent:main:subagent:hist-many-${i}`;
      const p = parseCanonical(k, c);
      return indexEntryOf(
        {
          key: k,
          agentId: "main",
          sessionId: crypto.randomUUID(),
          kind: p.kind,
          createdAt: now,
          updatedAt: now + i,
          inputTokens: 0,
          outputTokens: 0,
          totalTokens: 0,
          systemSent: false,
          abortedLastRun: false,
          spawnedBy: parent,
        },
        p,
      );
    });
    await sessionIndex(env, c, "main").upsertMany(entries);
    cfg({ agents: { defaults: { sandbox: { mode: "all" } } } });
    const r = await history({ sessionKey: oldChild }, parent);
    expect(r.details.messages[0].content[0].text).toBe("old child speaks");
  });
});

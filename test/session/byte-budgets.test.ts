import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { HISTORY_BYTE_CAP } from "../../src/policy/history-sanitize";
import { LIST_RESULT_MAX_BYTES, PREVIEW_ROW_MAX_BYTES, TRANSCRIPT_CHUNK_BYTES } from "../../src/session/byte-budget";
import { backfillHistoryHeads } from "../../src/session/schema";
import { SessionObject } from "../../src/session/session-object";
import type { TranscriptMessage } from "../../src/session/types";
import { exportToArchive } from "../../src/spawn/archive";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { MB, maxMessage, maxText, rpcBytes, SECRET, seedTranscript as seed } from "../helpers/max-messages";

/**
 * Byte budgets (docs/limits.md): a session of maximum-size messages is read within the same budgets
 * as an ordinary one, measured at the RPC boundary (what the object's method returns, serialised).
 */

/** A compaction's summary call (src/compaction/summarize.ts), not a run's. */
const isSummaryCall = (body: any) => String(body.messages[0]?.content ?? "").startsWith("Compaction summary step:");

const BIG = "agent:main:budget-big";

describe("a session of 60 maximum-size messages", () => {
  beforeAll(async () => {
    await seed(BIG, 60, maxMessage);
  });

  it("sessions_history at every limit: the result stays within 80 KB, and so does what the object returns", async () => {
    for (const limit of [1, 5, 20, 50, 200, 1000]) {
      const raw = await sessionStub(BIG).history({ limit, includeTools: false, maxBytes: HISTORY_BYTE_CAP });
      // Everything the object sends across the RPC boundary (history heads plus lineage).
      expect(rpcBytes(raw)).toBeLessThanOrEqual(HISTORY_BYTE_CAP + 200);
      const r = await invoke("sessions_history", { sessionKey: BIG, limit }, { sessionKey: BIG });
      expect(r.status).toBe(200);
      const d = r.details;
      expect(d.bytes).toBeLessThanOrEqual(HISTORY_BYTE_CAP);
      expect(rpcBytes(d.messages)).toBeLessThanOrEqual(HISTORY_BYTE_CAP);
      // A max-size message shows as its sanitised head: redacted, 4,000 characters and the marker.
      const newest = d.messages.at(-1);
      expect(newest.__switchboard.seq).toBe(60);
      expect(newest.content[0].text).toHaveLength(4000 + "\n…(truncated)…".length);
      expect(newest.content[0].text).not.toContain(SECRET);
      expect(d).toMatchObject({ contentTruncated: true, contentRedacted: true });
      expect(d.messages.length).toBe(Math.min(limit, 19));
      expect(d.hasMore).toBe(true);
    }
  });

  it("paging with nextBefore reaches every message once, newest page first", async () => {
    const seen: number[] = [];
    let before: number | undefined;
    for (let page = 0; page < 10; page++) {
      const r = await invoke(
        "sessions_history",
        { sessionKey: BIG, limit: 1000, ...(before ? { before } : {}) },
        { sessionKey: BIG },
      );
      seen.unshift(...r.details.messages.map((m: any) => m.__switchboard.seq));
      if (!r.details.hasMore) break;
      before = r.details.nextBefore;
    }
    expect(seen).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  });

  it("list previews are history pages: redacted, capped, within the byte budget, with the cut flagged", async () => {
    setConfigOverride({ tools: { sessions: { visibility: "agent" } } });
    const r = await invoke("sessions_list", { messageLimit: 20 }, { sessionKey: "agent:main:main" });
    expect(r.status).toBe(200);
    const row = r.details.sessions.find((s: any) => s.key === BIG);
    // Three ~4 KB heads fit a row's 16 KB preview budget.
    expect(row.messages.map((m: any) => m.__switchboard.seq)).toEqual([58, 59, 60]);
    for (const m of row.messages) {
      expect(m.content[0].text).not.toContain(SECRET);
      expect(m.content[0].text.length).toBeLessThanOrEqual(4000 + "\n…(truncated)…".length);
    }
    expect(rpcBytes(row.messages)).toBeLessThanOrEqual(PREVIEW_ROW_MAX_BYTES);
    // 20 were asked for; the preview budget held 3.
    expect(r.details.truncated).toBe(true);
    // What the list's call into the object carries.
    const raw = await sessionStub(BIG).history({ limit: 20, includeTools: false, maxBytes: PREVIEW_ROW_MAX_BYTES });
    expect(rpcBytes(raw)).toBeLessThanOrEqual(PREVIEW_ROW_MAX_BYTES + 200);
  });

  it("transcript.jsonl streams every message in chunks of at most 1 MiB (or one larger message)", async () => {
    const chunk = await sessionStub(BIG).transcriptChunk(0);
    expect(rpcBytes(chunk)).toBeLessThanOrEqual(TRANSCRIPT_CHUNK_BYTES + 1024);
    const res = await call("GET", `/v1/sessions/${enc(BIG)}/transcript.jsonl`);
    expect(res.status).toBe(200);
    const lines = String(res.json)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: "session", key: BIG });
    expect(lines.slice(1).map((l) => l.seq)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    // The export is the stored message, whole: the secret and all 512 KiB of it.
    expect(lines[60].message.content[0].text).toBe(maxText(60));
    expect(lines[60]).toMatchObject({
      type: "message",
      id: "60",
      timestamp: new Date(1_700_000_000_060).toISOString(),
    });
  });

  it("the archive export reads the transcript in budgeted chunks (counting wrapper) and writes all of it", async () => {
    const chunkSizes: number[] = [];
    await runInDurableObject(sessionStub(BIG), async (obj) => {
      const original = obj.transcript.exportChunk.bind(obj.transcript);
      obj.transcript.exportChunk = (after: number, max: number) => {
        const c = original(after, max);
        chunkSizes.push(new TextEncoder().encode(c.chunk).byteLength);
        return c;
      };
      await exportToArchive(obj, { retainAttachments: false });
      obj.transcript.exportChunk = original;
    });
    // One 512 KiB message per chunk (two do not fit in 1 MiB), then the empty end.
    expect(chunkSizes.length).toBe(61);
    expect(Math.max(...chunkSizes)).toBeLessThanOrEqual(TRANSCRIPT_CHUNK_BYTES);
    const meta = await sessionStub(BIG).getMeta();
    const obj = await env.ARCHIVE!.get(`subagents/main/${meta!.sessionId}.jsonl`);
    const text = await obj!.text();
    expect(text.trim().split("\n")).toHaveLength(61);
  });

  it("a new run's model context holds the newest messages within limits.maxContextBytes", async () => {
    const { calls } = useFakeProvider({ auto: (c) => c.reply("ok") });
    const run = await sendAndWait(BIG, "hello");
    expect(run.status).toBe("ok");
    // The session outgrew its context: it is compacted first (src/compaction/), each call within the budget too.
    for (const c of calls) expect(rpcBytes(c.body.messages)).toBeLessThanOrEqual(MB + 4096);
    const sent = calls.find((c) => !isSummaryCall(c.body))!.body.messages as { role: string; content: string }[];
    // 1 MiB by default, never 40 × 512 KiB: the summary of the older turns, then the new message (the newest
    // 512 KiB reply belongs to the turn before it, which no longer fits beside it and was summarised whole).
    expect(rpcBytes(sent)).toBeLessThanOrEqual(MB + 4096);
    expect(sent[0].content).toContain("<summary>");
    expect(sent.filter((m) => m.role !== "system").map((m) => m.content.slice(0, 5))).toEqual(["hello"]);
  });

  it("a lower maxContextBytes gives a smaller context, never less than the newest message", async () => {
    const { calls } = useFakeProvider({
      auto: (c) => c.reply("ok"),
      extraConfig: { limits: { maxContextBytes: 64 * 1024 } },
    });
    await sendAndWait(BIG, "again");
    const sent = calls.find((c) => !isSummaryCall(c.body))!.body.messages as { role: string; content: string }[];
    expect(sent.filter((m) => m.role !== "system").map((m) => m.content)).toEqual(["hello", "ok", "again"]);
    expect(rpcBytes(sent)).toBeLessThanOrEqual(64 * 1024);
  });
});

describe("the whole sessions_list result", () => {
  it("stays within 4 MB at the largest page (200 rows) when every row wants more than its preview budget, and says it was cut", async () => {
    // Three 4,000-character blocks: a message whose history head is about 12 KB; two of them pass a row's 16 KB.
    const wide = (i: number): TranscriptMessage => ({
      role: "user",
      content: Array.from({ length: 3 }, (_, b) => ({ type: "text" as const, text: `${i}.${b} `.padEnd(4000, "w") })),
      timestamp: 1_700_000_000_000 + i,
    });
    for (let s = 0; s < 200; s++) await seed(`agent:research:wide-${s}`, 2, wide);
    setConfigOverride({ tools: { sessions: { visibility: "agent" } } });
    const r = await invoke("sessions_list", { messageLimit: 2, limit: 200 }, { sessionKey: "agent:research:main" });
    expect(r.status).toBe(200);
    expect(r.details.count).toBe(200);
    expect(rpcBytes(r.details)).toBeLessThanOrEqual(LIST_RESULT_MAX_BYTES);
    expect(r.details.truncated).toBe(true);
    // Every row keeps a preview: its newest message, within the row's budget.
    for (const row of r.details.sessions) {
      expect(row.messages.map((m: any) => m.__switchboard.seq)).toEqual([2]);
      expect(rpcBytes(row.messages)).toBeLessThanOrEqual(PREVIEW_ROW_MAX_BYTES);
    }
  }, 120_000);

  it("an ordinary list carries no truncated flag", async () => {
    setConfigOverride({ tools: { sessions: { visibility: "agent" } } });
    await sendAndWait("agent:main:budget-small", "hi");
    const r = await invoke("sessions_list", { messageLimit: 2 }, { sessionKey: "agent:main:main" });
    const row = r.details.sessions.find((s: any) => s.key === "agent:main:budget-small");
    expect(row.messages.map((m: any) => m.content[0].text)).toEqual(["hi", "hi"]);
    expect(r.details.truncated).toBeUndefined();
  });

  it("kinds with 101 entries (duplicates) answer like one", async () => {
    const many = await invoke("sessions_list", { kinds: Array(101).fill("group") }, { sessionKey: "agent:main:main" });
    const one = await invoke("sessions_list", { kinds: ["group"] }, { sessionKey: "agent:main:main" });
    expect(many.status).toBe(200);
    expect(many.details.sessions).toEqual(one.details.sessions);
    const rest = await call("GET", `/v1/sessions?kinds=${Array(101).fill("main").join(",")}`);
    expect(rest.status).toBe(200);
  });
});

describe("history heads", () => {
  it("budgeted reads and a run's own messages are index seeks, never a scan of the transcript", async () => {
    const key = "agent:main:budget-plans";
    await seed(key, 2, (i) => ({ role: "user", content: [{ type: "text", text: `${i}` }], timestamp: i }));
    await runInDurableObject(sessionStub(key), (obj) => {
      const plan = (q: string, ...args: unknown[]) =>
        obj.sql
          .exec<{ detail: string }>(`EXPLAIN QUERY PLAN ${q}`, ...args)
          .toArray()
          .map((r) => r.detail)
          .join("; ");
      expect(plan("SELECT json FROM messages WHERE run_id = ? AND role = 'assistant'", "r")).toMatch(
        /USING INDEX messages_run/,
      );
      expect(
        plan("SELECT json FROM messages WHERE run_id = ? AND role = 'toolResult' ORDER BY seq DESC LIMIT 1", "r"),
      ).toMatch(/USING INDEX messages_run/);
      expect(
        plan(
          "SELECT seq, head_bytes FROM messages INDEXED BY messages_visible WHERE is_tool = 0 AND seq < ? ORDER BY seq DESC LIMIT ?",
          9,
          5,
        ),
      ).toMatch(/USING COVERING INDEX messages_visible/);
      expect(
        plan("SELECT seq, bytes FROM messages INDEXED BY messages_sizes WHERE seq > ? ORDER BY seq LIMIT ?", 0, 5),
      ).toMatch(/USING COVERING INDEX messages_sizes/);
    });
  });

  it("messages written before heads existed get their sizes and heads from the migration's backfill", async () => {
    const key = "agent:main:budget-legacy";
    await seed(key, 3, (i) => ({
      role: "user",
      content: [{ type: "text", text: `${i} ${SECRET} `.padEnd(6000, "l") }],
      timestamp: i,
    }));
    await runInDurableObject(sessionStub(key), (obj) => {
      // As the rows were before the byte-budget migration: no heads, no sizes.
      obj.sql.exec(
        "DELETE FROM message_heads WHERE seq IN (SELECT seq FROM messages WHERE seq > (SELECT MAX(seq) - 2 FROM messages))",
      );
      obj.sql.exec("UPDATE messages SET bytes = 0, head_bytes = 0");
      backfillHistoryHeads(obj.sql);
      const rows = obj.sql
        .exec<{ bytes: number; head_bytes: number; heads: number }>(
          "SELECT bytes, head_bytes, (SELECT COUNT(*) FROM message_heads h WHERE h.seq = m.seq) AS heads FROM messages m",
        )
        .toArray();
      for (const r of rows) expect(r.heads).toBe(1);
      expect(rows.slice(-2).every((r) => r.bytes > 6000 && r.head_bytes > 4000 && r.head_bytes < 4200)).toBe(true);
    });
    const r = await invoke("sessions_history", { sessionKey: key }, { sessionKey: key });
    expect(r.details.messages.map((m: any) => m.content[0].text.slice(0, 14))).toEqual([
      "1 sk-abc…6789 ",
      "2 sk-abc…6789 ",
      "3 sk-abc…6789 ",
    ]);
    expect(r.details).toMatchObject({ contentRedacted: true, contentTruncated: true });
  });

  it("a message that claims to be a stored head is still sanitised when written", async () => {
    const key = "agent:main:budget-forged-head";
    await seed(
      key,
      1,
      () =>
        ({
          role: "user",
          content: [{ type: "text", text: `token ${SECRET}` }],
          timestamp: 1,
          __sanitized: { head: true },
        }) as unknown as TranscriptMessage,
    );
    const r = await invoke("sessions_history", { sessionKey: key }, { sessionKey: key });
    expect(r.details.messages[0].content[0].text).toBe("token sk-abc…6789");
    expect(r.details.contentRedacted).toBe(true);
  });
});

describe("visibility before reading", () => {
  it("a send the caller may not make reads nothing of the target session", async () => {
    const target = "agent:research:budget-other-agent";
    await seed(target, 1, (i) => ({ role: "user", content: [{ type: "text", text: `${i}` }], timestamp: i }));
    const metaReads = vi.spyOn(SessionObject.prototype, "getMeta");
    const historyReads = vi.spyOn(SessionObject.prototype, "history");
    // Cross-agent with visibility "tree" (the default): refused whatever the target holds.
    const send = await invoke(
      "sessions_send",
      { sessionKey: target, message: "hi", timeoutSeconds: 0 },
      { sessionKey: "agent:main:main" },
    );
    expect(send.details).toMatchObject({
      status: "forbidden",
      error: "Session send visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
    });
    const hist = await invoke("sessions_history", { sessionKey: target }, { sessionKey: "agent:main:main" });
    expect(hist.details).toMatchObject({ status: "forbidden" });
    expect(metaReads.mock.contexts.map((o: any) => o.key)).not.toContain(target);
    expect(historyReads).not.toHaveBeenCalled();
  });

  it("a history call the caller may not make returns nothing of the session from the object", async () => {
    const key = "agent:main:budget-private";
    await seed(key, 3, (i) => ({ role: "user", content: [{ type: "text", text: `private ${i}` }], timestamp: i }), {
      spawnedBy: "agent:main:someone-else",
    });
    const denied = await sessionStub(key).history({
      limit: 50,
      includeTools: false,
      maxBytes: HISTORY_BYTE_CAP,
      onlyIfSpawnedBy: "agent:main:main",
    });
    expect(denied).toEqual({ messages: [], hasMore: false, nextBefore: null, cutByBytes: false, denied: true });
    const parent = await sessionStub(key).history({
      limit: 50,
      includeTools: false,
      maxBytes: HISTORY_BYTE_CAP,
      onlyIfSpawnedBy: "agent:main:someone-else",
    });
    expect(parent.messages).toHaveLength(3);
    // Through the tool (tree visibility, the default): forbidden, from a read that returned nothing.
    const r = await invoke("sessions_history", { sessionKey: key }, { sessionKey: "agent:main:main" });
    expect(r.details).toEqual({
      status: "forbidden",
      error: "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
  });
});

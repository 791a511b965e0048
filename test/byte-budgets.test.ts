import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { queueDelivery } from "../src/channels/outbox";
import { parseConfig, setConfigOverride } from "../src/config/load";
import { SwitchboardError } from "../src/errors";
import { HISTORY_BYTE_CAP } from "../src/policy/history-sanitize";
import {
  capText,
  DELIVERY_LIST_BYTES,
  LIST_RESULT_MAX_BYTES,
  MESSAGE_MAX_BYTES,
  PREVIEW_ROW_MAX_BYTES,
  storedTextBytes,
  TRANSCRIPT_CHUNK_BYTES,
  truncationMarker,
} from "../src/session/byte-budget";
import { callExtension } from "../src/session/extensions";
import { backfillHistoryHeads } from "../src/session/schema";
import { SessionObject } from "../src/session/session-object";
import type { TranscriptMessage } from "../src/session/types";
import { freezeResult } from "../src/spawn/announce-format";
import { exportToArchive } from "../src/spawn/archive";
import { useFakeProvider } from "./helpers/fake-provider";
import { call, enc, invoke, sendAndWait, sessionStub } from "./helpers/http";
import { baseConfig, flowsOf, installFakes, type ModelRequest, until } from "./helpers/scripted";

/**
 * Byte budgets (docs/limits.md): a session of maximum-size messages is read within the same budgets
 * as an ordinary one, measured at the RPC boundary (what the object's method returns, serialised).
 */

afterEach(() => {
  setConfigOverride(null);
  vi.restoreAllMocks();
});

const MB = 1024 * 1024;
/** A compaction's summary call (src/compaction/summarize.ts), not a run's. */
const isSummaryCall = (body: any) => String(body.messages[0]?.content ?? "").startsWith("Compaction summary step:");
const SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789";
/** 512 KiB of text exactly, starting with a secret that history and previews must mask. */
const maxText = (i: number) => {
  const head = `#${i} ${SECRET} `;
  return head + "x".repeat(MESSAGE_MAX_BYTES - head.length);
};
const rpcBytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).byteLength;

function maxMessage(i: number): TranscriptMessage {
  const text = maxText(i);
  return i % 2 === 1
    ? { role: "user", content: [{ type: "text", text }], timestamp: 1_700_000_000_000 + i }
    : {
        role: "assistant",
        content: [{ type: "text", text }],
        api: "test",
        provider: "test",
        model: "m",
        stopReason: "stop",
        timestamp: 1_700_000_000_000 + i,
      };
}

/** Write `count` messages straight into a session's transcript (one transaction per message, like runs do). */
async function seed(
  key: string,
  count: number,
  make: (i: number) => TranscriptMessage,
  init?: Record<string, unknown>,
): Promise<void> {
  await sessionStub(key).ensureSession(init);
  for (let i = 1; i <= count; i++) {
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.transcript.append(make(i), null);
    });
  }
}

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

describe("stored sizes", () => {
  const samples = [
    "plain",
    "é ü 中文",
    "😀 pairs 😀",
    'quote " and \\ backslash',
    "lines\n\ttabs\r",
    "\u0000\u0001\u001f controls",
    "lone \ud800 high",
    "lone \udc00 low",
    "\u2028 separators \u2029",
  ];
  it("storedTextBytes is the UTF-8 size of the JSON-encoded string, without its quotes", () => {
    for (const t of samples)
      expect(storedTextBytes(t)).toBe(new TextEncoder().encode(JSON.stringify(t)).byteLength - 2);
  });
  it("a sub-agent's frozen Result is 100 KiB as stored, whatever its characters", () => {
    const controls = "\u0001".repeat(60_000); // 60,000 characters, 360,000 bytes as stored
    const frozen = freezeResult(controls)!;
    expect(frozen.endsWith("\n[truncated: frozen completion output exceeded 100KB (352KB)]")).toBe(true);
    expect(storedTextBytes(frozen.slice(0, frozen.indexOf("\n[truncated")))).toBeLessThanOrEqual(100 * 1024);
    expect(freezeResult("x".repeat(100 * 1024))).toBe("x".repeat(100 * 1024));
  });
  it("capText keeps a fitting text as it is, else cuts it with the marker within the limit and never splits a pair", () => {
    expect(capText("short", 100)).toBe("short");
    for (const t of samples) {
      const long = t.repeat(400);
      for (const max of [64, 100, 1000]) {
        const cut = capText(long, max);
        expect(storedTextBytes(cut)).toBeLessThanOrEqual(max);
        expect(cut.endsWith(truncationMarker(max))).toBe(true);
        expect(long.startsWith(cut.slice(0, cut.length - truncationMarker(max).length))).toBe(true);
        expect(
          /[\ud800-\udbff]$/.test(cut.slice(0, cut.length - truncationMarker(max).length)) && !/lone/.test(t),
        ).toBe(false);
      }
    }
  });
});

describe("inbound size caps", () => {
  it("limits.maxMessageBytes and maxContextBytes take their documented ranges (docs/limits.md)", () => {
    const err = (limits: Record<string, unknown>) => {
      const c = parseConfig({ limits });
      return c instanceof SwitchboardError ? c.message : null;
    };
    expect(err({ maxMessageBytes: 4096, maxContextBytes: 64 * 1024 })).toBeNull();
    expect(err({ maxMessageBytes: MESSAGE_MAX_BYTES + 1 })).toContain("limits.maxMessageBytes");
    expect(err({ maxMessageBytes: 1023 })).toContain("limits.maxMessageBytes");
    expect(err({ maxContextBytes: 1000 })).toContain("limits.maxContextBytes");
    expect(err({ maxContextBytes: Infinity })).toContain("limits.maxContextBytes");
  });

  it("a message over 512 KiB is a 413 naming the field, and nothing is stored", async () => {
    const key = "agent:main:budget-413";
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "a".repeat(MESSAGE_MAX_BYTES + 1) });
    expect(r.status).toBe(413);
    expect(r.json).toEqual({
      ok: false,
      error: {
        type: "payload_too_large",
        message: expect.stringMatching(/^message: 524289 bytes exceeds the limit of 524288 bytes/),
      },
    });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
    // Exactly at the cap is accepted.
    expect(
      (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "a".repeat(MESSAGE_MAX_BYTES) })).status,
    ).toBe(202);
  });

  it("sizes count UTF-8 as stored: multi-byte characters and escaped control characters", async () => {
    setConfigOverride({ limits: { maxMessageBytes: 4096 } });
    const key = "agent:main:budget-utf8";
    // 1,366 × "é" (2 bytes) = 2,732 bytes: fits; 683 × "\u0001" (6 bytes escaped) = 4,098: does not.
    expect((await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "é".repeat(1366) })).status).toBe(202);
    const ctl = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "\u0001".repeat(683) });
    expect(ctl.status).toBe(413);
    expect(ctl.json.error.message).toMatch(/^message: 4098 bytes exceeds the limit of 4096 bytes/);
  });

  it("sessions_send and sessions_spawn refuse over-cap text with a 413 naming message / task; nothing is queued", async () => {
    setConfigOverride({ limits: { maxMessageBytes: 2048 } });
    const target = "agent:main:budget-send-target";
    const send = await invoke(
      "sessions_send",
      { sessionKey: target, message: "m".repeat(2049), timeoutSeconds: 0 },
      { sessionKey: "agent:main:main" },
    );
    expect(send.status).toBe(413);
    expect(send.body.error).toMatchObject({
      type: "payload_too_large",
      message: expect.stringMatching(/^message: 2049 bytes/),
    });
    expect(await sessionStub(target).getMeta()).toBeNull();
    const spawn = await invoke(
      "sessions_spawn",
      { task: "t".repeat(3000) },
      { sessionKey: "agent:main:budget-spawner" },
    );
    expect(spawn.status).toBe(413);
    expect(spawn.body.error.message).toMatch(/^task: 3000 bytes/);
    const children = await invoke("sessions_list", {}, { sessionKey: "agent:main:budget-spawner" });
    expect(children.details.sessions.filter((s: any) => s.spawnedBy === "agent:main:budget-spawner")).toEqual([]);
  });
});

describe("generated text over the cap is kept truncated, never refused", () => {
  it("a model reply over limits.maxMessageBytes: the run is ok, reply and transcript end with the marker", async () => {
    useFakeProvider({ auto: (c) => c.reply("r".repeat(10_000)), extraConfig: { limits: { maxMessageBytes: 4096 } } });
    const key = "agent:main:budget-long-reply";
    const run = await sendAndWait(key, "go");
    expect(run.status).toBe("ok");
    expect(new TextEncoder().encode(run.reply).byteLength).toBeLessThanOrEqual(4096);
    expect(run.reply.endsWith(truncationMarker(4096))).toBe(true);
    const lines = String((await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[2].message.content[0].text).toBe(run.reply);
  });

  it("a tool result over the cap is stored truncated with the marker", async () => {
    const key = "agent:main:budget-tool";
    // Three 4,000-character history texts: about 12 KB of tool result, three times the 4 KiB cap.
    const other = "agent:main:budget-tool-source";
    await seed(other, 3, (i) => ({
      role: "user",
      content: [{ type: "text", text: `${i}`.padEnd(10_000, "h") }],
      timestamp: i,
    }));
    useFakeProvider({
      auto: (c) =>
        (c.body.messages as any[]).some((m) => m.role === "tool")
          ? c.reply("done")
          : c.toolCall("sessions_history", { sessionKey: other }),
      extraConfig: { limits: { maxMessageBytes: 4096 }, tools: { sessions: { visibility: "agent" } } },
    });
    const run = await sendAndWait(key, "list");
    expect(run.status).toBe("ok");
    const h = await sessionStub(key).transcriptChunk(0);
    const tool = h.chunk
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .find((l) => l.message.role === "toolResult");
    expect(tool.message.content[0].text.endsWith(truncationMarker(4096))).toBe(true);
    expect(new TextEncoder().encode(JSON.stringify(tool.message.content[0].text)).byteLength).toBeLessThanOrEqual(
      4096 + 2,
    );
  });
});

describe("delivery listings", () => {
  it("stop at their byte budget inside the object and say so", async () => {
    const key = "agent:main:budget-deliveries";
    await sessionStub(key).ensureSession();
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.storage.transactionSync(() => {
        for (let i = 0; i < 8; i++)
          queueDelivery(obj, {
            kind: "reply",
            route: { channel: "nowhere", to: null },
            message: `${i}`.padEnd(500_000, "d"),
            idempotencyKey: `big-${i}`,
          });
      });
    });
    const raw = await callExtension(sessionStub(key), "outbox", "list", { limit: 500 });
    expect(rpcBytes(raw)).toBeLessThanOrEqual(DELIVERY_LIST_BYTES);
    expect(raw.deliveries.length).toBe(4);
    expect(raw.truncated).toBe(true);
    const r = await call("GET", `/v1/sessions/${enc(key)}/deliveries?limit=500`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ count: 4, truncated: true });
    const small = await call("GET", `/v1/sessions/${enc(key)}/deliveries?limit=2`);
    expect(small.json.truncated).toBeUndefined();
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

describe("a 500 KB sessions_send through 5 ping-pong turns and the announce", () => {
  it("completes, every turn receives the whole text, and no flow row, timer or run row holds more than its cap", async () => {
    const req = "agent:main:discord:group:budget-pp-req";
    const target = "agent:main:discord:group:budget-pp-target";
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 5 } } }));
    const fakes = installFakes((r: ModelRequest) => (r.kind === "announce" ? "announce now" : r.lastUser));
    const message = "p".repeat(500_000);
    const sent = await invoke("sessions_send", { sessionKey: target, message, timeoutSeconds: 0 }, { sessionKey: req });
    expect(sent.details.status).toBe("accepted");
    const flow = await until(async () => {
      const f = (await flowsOf(target))[0];
      expect(f?.step).toBe("done");
      return f;
    }, 60_000);
    expect(flow.outcome).toBe("announced");
    expect(flow.turns.map((t: any) => [t.turn, t.status])).toEqual([
      [1, "ok"],
      [2, "ok"],
      [3, "ok"],
      [4, "ok"],
      [5, "ok"],
    ]);
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["announce now"]));
    // Primary, five turns alternating requester/target, announce: each turn got the other side's whole reply.
    expect(fakes.model.map((m) => [m.kind, m.session === req ? "req" : "target", m.lastUser.length])).toEqual([
      ["primary", "target", 500_000],
      ["turn", "req", 500_000],
      ["turn", "target", 500_000],
      ["turn", "req", 500_000],
      ["turn", "target", 500_000],
      ["turn", "req", 500_000],
      ["announce", "target", "Agent-to-agent announce step.".length],
    ]);
    expect(fakes.model[6].system).toContain(`Original request: ${"p".repeat(100)}`);
    expect(fakes.model[6].system).toContain(truncationMarker(16 * 1024));
    // Rows in both objects: the flow holds quotes and excerpts, timers hold references, runs one message and one reply.
    for (const key of [req, target]) {
      await runInDurableObject(sessionStub(key), (obj) => {
        const flows =
          obj.sql.exec<{ n: number }>("SELECT MAX(length(CAST(json AS BLOB))) AS n FROM flows").one().n ?? 0;
        const timers =
          obj.sql.exec<{ n: number }>("SELECT MAX(length(CAST(payload AS BLOB))) AS n FROM timers").one().n ?? 0;
        const runs =
          obj.sql
            .exec<{ n: number }>(
              "SELECT MAX(length(CAST(input_json AS BLOB)) + length(CAST(COALESCE(reply, '') AS BLOB))) AS n FROM runs",
            )
            .one().n ?? 0;
        expect(flows).toBeLessThan(600 * 1024);
        expect(timers).toBeLessThan(1024);
        expect(runs).toBeLessThan(1100 * 1024);
      });
    }
  });
});

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { ROW_TRIGGER } from "../../src/compaction/plan";
import { SUMMARY_TRUNCATED } from "../../src/compaction/summarize";
import { setConfigOverride } from "../../src/config/load";
import { COMPACTION_STEP_HEADER } from "../../src/send/control-tokens";
import { LEASE_MS } from "../../src/session/run-types";
import { fakeWire, type WireCall } from "../helpers/fake-wire";
import { advance, call, enc, sendAndWait, sessionStub } from "../helpers/http";
import { until } from "../helpers/scripted";

/**
 * Long chats do not forget (docs/compaction.md): when the context no longer fits, older turns are
 * summarised by the session's model and the summary kept in the transcript; history shows a
 * "Compaction" marker row (OpenClaw's shape) and keeps every message; a compaction cut short by an
 * eviction writes nothing and the retried run compacts once.
 */

const uid = () => crypto.randomUUID().slice(0, 8);
const BASE = "https://compact.test/v1";
const isSummaryCall = (c: WireCall) => String(c.body.messages[0]?.content ?? "").startsWith(COMPACTION_STEP_HEADER);

/** A provider model with a 4,000-token window: a 12,000-byte context budget (3,000 tokens after the reserve). */
function configure(compaction: Record<string, unknown> = {}, model: Record<string, unknown> = {}) {
  setConfigOverride({
    agents: {
      defaults: {
        model: "p/m",
        compaction: { keepRecentTokens: 500, recentTurnsPreserve: 1, ...compaction },
      },
      entries: { main: {} },
    },
    models: { providers: { p: { baseUrl: BASE, models: [{ id: "m", name: "M", contextWindow: 4000, ...model }] } } },
  });
}

/** A 1.5 KB (or `size`) message whose first line names it. */
const msg = (i: number, size = 1500) => `message ${i}: remember fact-${i}\n${"x".repeat(size)}`;

async function history(key: string, includeTools = false): Promise<any[]> {
  return (await call("GET", `/v1/sessions/${enc(key)}/history?limit=200${includeTools ? "&includeTools=true" : ""}`))
    .json.messages;
}

async function compactions(key: string): Promise<{ first_kept_seq: number; summary: string }[]> {
  return runInDurableObject(sessionStub(key), async (_o, state) =>
    state.storage.sql
      .exec<{ first_kept_seq: number; summary: string }>("SELECT first_kept_seq, summary FROM compactions ORDER BY id")
      .toArray(),
  );
}

describe("compaction", () => {
  it("summarises older turns once the context outgrows its budget; history shows a marker and keeps every message", async () => {
    configure();
    let summaries = 0;
    const calls = fakeWire(
      "openai-completions",
      (_n, body) => ({ text: isSummaryCall({ body } as WireCall) ? `SUMMARY-${++summaries}` : "ok" }),
      undefined,
      BASE,
    );
    const key = `agent:main:compact-${uid()}`;
    for (let i = 1; i <= 8; i++) expect(await sendAndWait(key, msg(i))).toMatchObject({ status: "ok", reply: "ok" });
    expect(summaries).toBe(1);

    // The summary call got the older turns; the run after it got the summary instead of them.
    const summaryAt = calls.findIndex(isSummaryCall);
    const input = String(calls[summaryAt].body.messages[1].content);
    expect(input).toContain("[user] message 1: remember fact-1");
    expect(input).toContain("Previous summary:\n(none)");
    const next = calls[summaryAt + 1].body;
    expect(next.messages[0].content).toContain(
      "The conversation history before this point was compacted into the following summary:\n\n<summary>\nSUMMARY-1\n</summary>",
    );
    expect(JSON.stringify(next.messages.slice(1))).not.toContain("fact-1\\n");
    // The turn that triggered it is kept verbatim.
    expect(next.messages.at(-1)).toMatchObject({
      role: "user",
      content: expect.stringMatching(/^message \d+: remember/),
    });
    expect(JSON.stringify(next).length).toBeLessThan(12_000 + 4_000);

    // History: every message, plus one marker in OpenClaw's shape (no summary text).
    const rows = await history(key);
    expect(rows.filter((m) => m.role === "user")).toHaveLength(8);
    const markers = rows.filter((m) => m.role === "system");
    expect(markers).toEqual([
      {
        role: "system",
        content: [{ type: "text", text: "Compaction" }],
        timestamp: expect.any(Number),
        __openclaw: { kind: "compaction", id: "1", tokensBefore: expect.any(Number), tokensAfter: expect.any(Number) },
        __switchboard: { seq: expect.any(Number) },
      },
    ]);
    expect(markers[0].__openclaw.tokensAfter).toBeLessThan(markers[0].__openclaw.tokensBefore);
    expect(JSON.stringify(rows)).not.toContain("SUMMARY-1");

    // Later runs keep the summary; a second compaction folds the first summary in.
    for (let i = 9; i <= 16; i++) await sendAndWait(key, msg(i));
    expect(summaries).toBe(2);
    const second = calls.filter(isSummaryCall)[1];
    expect(String(second.body.messages[1].content)).toContain("Previous summary:\nSUMMARY-1");
    expect((await compactions(key)).map((c) => c.summary)).toEqual(["SUMMARY-1", "SUMMARY-2"]);
    expect((await history(key)).filter((m) => m.role === "user")).toHaveLength(16);
  });

  it("is off with compaction.enabled false: the context is the newest messages that fit, nothing is summarised", async () => {
    configure({ enabled: false });
    const calls = fakeWire("openai-completions", () => ({ text: "ok" }), undefined, BASE);
    const key = `agent:main:nocompact-${uid()}`;
    for (let i = 1; i <= 10; i++) await sendAndWait(key, msg(i));
    expect(calls.filter(isSummaryCall)).toHaveLength(0);
    expect(await compactions(key)).toEqual([]);
    expect((await history(key)).some((m) => m.role === "system")).toBe(false);
  });

  it("a failed summary leaves the history as it was and the run answers; the next run tries again", async () => {
    configure();
    let fail = true;
    fakeWire(
      "openai-completions",
      (_n, body) => {
        if (!isSummaryCall({ body } as WireCall)) return { text: "ok" };
        if (fail) throw new Error("summary provider down");
        return { text: "SUMMARY-OK" };
      },
      undefined,
      BASE,
    );
    const key = `agent:main:compactfail-${uid()}`;
    for (let i = 1; i <= 8; i++) expect(await sendAndWait(key, msg(i))).toMatchObject({ status: "ok" });
    expect(await compactions(key)).toEqual([]);
    fail = false;
    await sendAndWait(key, msg(9));
    expect((await compactions(key)).map((c) => c.summary)).toEqual(["SUMMARY-OK"]);
  });

  it("is bounded: a summary over 32 KiB is cut with OpenClaw's marker", async () => {
    configure();
    fakeWire(
      "openai-completions",
      (_n, body) => ({ text: isSummaryCall({ body } as WireCall) ? "s".repeat(40_000) : "ok" }),
      undefined,
      BASE,
    );
    const key = `agent:main:compactbig-${uid()}`;
    for (let i = 1; i <= 8; i++) await sendAndWait(key, msg(i));
    const [c] = await compactions(key);
    expect(c.summary.endsWith(SUMMARY_TRUNCATED)).toBe(true);
    expect(new TextEncoder().encode(c.summary).length).toBeLessThanOrEqual(32 * 1024);
  });

  it("an eviction during the summary loses and duplicates nothing: the retried run compacts once", async () => {
    configure();
    const gate = { open: true };
    let summaries = 0;
    const calls = fakeWire(
      "openai-completions",
      (_n, body) => ({ text: isSummaryCall({ body } as WireCall) ? `SUMMARY-${++summaries}` : "ok" }),
      gate,
      BASE,
    );
    const key = `agent:main:compactevict-${uid()}`;
    // 3 KB turns: three fit the 12,000-byte budget, the fourth does not.
    for (let i = 1; i <= 3; i++) await sendAndWait(key, msg(i, 3000));
    expect(await compactions(key)).toEqual([]);
    // The 4th run compacts first: hold its summary call, and evict the session meanwhile.
    gate.open = false;
    const sent = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: msg(4, 3000) });
    await until(async () => expect(calls.some(isSummaryCall)).toBe(true));
    // Evicted abruptly (as by a deploy or a crash): only this object is reset, its storage kept.
    await runInDurableObject(sessionStub(key), (_obj, state) => state.abort("evicted by the test")).catch(() => {});
    gate.open = true;
    expect(await compactions(key)).toEqual([]);
    // The lease finds the lost run and queues it again; its retry compacts, once.
    await advance(key, LEASE_MS);
    const ended = (await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`)).json;
    expect(ended).toMatchObject({ status: "ok", reply: "ok" });
    expect((await compactions(key)).length).toBe(1);
    // Asked twice (the lost attempt's call and the retry's), written once.
    expect(calls.filter(isSummaryCall)).toHaveLength(2);
    const rows = await history(key);
    expect(rows.filter((m) => m.role === "system")).toHaveLength(1);
    expect(rows.filter((m) => m.role === "user").map((m) => m.content[0].text.split("\n")[0])).toEqual(
      Array.from({ length: 4 }, (_, i) => `message ${i + 1}: remember fact-${i + 1}`),
    );
    expect(rows.filter((m) => m.role === "assistant")).toHaveLength(4);
  });

  it(`many small messages compact too: ${ROW_TRIGGER} since the last compaction, however few bytes`, async () => {
    setConfigOverride({ agents: { defaults: { model: "builtin/echo" }, entries: { main: {} } } });
    const key = `agent:main:compactrows-${uid()}`;
    for (let i = 1; i <= ROW_TRIGGER / 2; i++) await sendAndWait(key, `short ${i}`);
    expect(await compactions(key)).toEqual([]);
    await sendAndWait(key, "one more");
    const [c] = await compactions(key);
    expect(c.summary).toContain("- user: short 1\n");
    // What is kept stays under the trigger: the next run does not compact again.
    await sendAndWait(key, "and another");
    expect(await compactions(key)).toHaveLength(1);
  });

  it("works offline: builtin/echo writes a deterministic summary that keeps what the user said", async () => {
    setConfigOverride({
      agents: {
        defaults: { model: "builtin/echo", compaction: { keepRecentTokens: 500, recentTurnsPreserve: 1 } },
        entries: { main: {} },
      },
      limits: { maxContextBytes: 16 * 1024 },
    });
    const key = `agent:main:compactecho-${uid()}`;
    await sendAndWait(key, "the code word is PLUM");
    for (let i = 1; i <= 12; i++) await sendAndWait(key, msg(i));
    const all = await compactions(key);
    expect(all.length).toBeGreaterThan(0);
    const latest = all.at(-1)!.summary;
    expect(latest).toContain("- user: the code word is PLUM");
    expect(latest).toContain("- user: message 1: remember fact-1");
    expect((await history(key)).filter((m) => m.role === "system").length).toBe(all.length);
  });
});

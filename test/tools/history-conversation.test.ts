import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { migrate } from "../../src/session/schema";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/**
 * History reads like a conversation: replies that are only a control token and the prompts of
 * internal announce steps are left out of sessions_history (and list previews), shown with
 * includeTools; paging with `before` still reaches every visible message.
 */

const texts = (messages: any[]) =>
  messages.map(
    (m) =>
      `${m.role}:${(Array.isArray(m.content) ? m.content.map((b: any) => b.text ?? `[${b.type}]`).join("") : m.content) || "-"}`,
  );

async function history(key: string, query: string) {
  const r = await call("GET", `/v1/sessions/${enc(key)}/history?${query}`);
  expect(r.status).toBe(200);
  return r.json;
}

describe("sessions_history hides control tokens and internal prompts", () => {
  it.each(["NO_REPLY", "REPLY_SKIP", "ANNOUNCE_SKIP", "  NO_REPLY\n"])(
    "a reply that is only %j is hidden, shown with includeTools; real text mentioning it is kept",
    async (token) => {
      setConfigOverride(subagentConfig());
      installFakes((c) =>
        c.lastUser === "quiet please" ? token : c.lastUser === "mention" ? `${token.trim()} is a token` : "hello back",
      );
      const key = requesterKey("hist");
      await sendAndWait(key, "hi");
      await sendAndWait(key, "quiet please");
      await sendAndWait(key, "mention");
      const plain = await history(key, "limit=50");
      expect(texts(plain.messages)).toEqual([
        "user:hi",
        "assistant:hello back",
        "user:quiet please",
        "user:mention",
        `assistant:${token.trim()} is a token`,
      ]);
      const all = await history(key, "limit=50&includeTools=true");
      expect(texts(all.messages)).toEqual([
        "user:hi",
        "assistant:hello back",
        "user:quiet please",
        `assistant:${token}`,
        "user:mention",
        `assistant:${token.trim()} is a token`,
      ]);
      // The tool shows the same conversation, and list previews too.
      const tool = await invoke("sessions_history", { sessionKey: key, limit: 50 }, { sessionKey: key });
      expect(texts(tool.details.messages)).toEqual(texts(plain.messages));
      const row = (await invoke("sessions_list", { messageLimit: 3 }, { sessionKey: key })).details.sessions.find(
        (s: any) => s.key === key,
      );
      expect(texts(row.messages)).toEqual([
        "user:quiet please",
        "user:mention",
        `assistant:${token.trim()} is a token`,
      ]);
    },
  );

  it("a sub-agent's history leaves out its announce-step prompt and a silent announce reply", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "the finding" : c.step === "announce" ? "ANNOUNCE_SKIP" : "ok"));
    const req = requesterKey("hist-sub");
    const r = await invoke("sessions_spawn", { task: "find it" }, { sessionKey: req });
    const child = r.details.childSessionKey as string;
    await settle(child);
    await runDurableObjectAlarm(sessionStub(req));
    const plain = await history(child, "limit=50");
    expect(plain.messages.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    expect(texts(plain.messages)[1]).toBe("assistant:the finding");
    const all = await history(child, "limit=50&includeTools=true");
    expect(texts(all.messages).slice(2)).toEqual(["user:Sub-agent announce step.", "assistant:ANNOUNCE_SKIP"]);
  });

  it("paging with `before` skips hidden rows and reaches every visible message, page by page", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) =>
      /^q\d+$/.test(c.lastUser) && Number(c.lastUser.slice(1)) % 2 === 0 ? "NO_REPLY" : `a-${c.lastUser}`,
    );
    const key = requesterKey("hist-page");
    for (let i = 1; i <= 6; i++) await sendAndWait(key, `q${i}`);
    const seen: string[] = [];
    let before: number | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const page: any = await history(key, `limit=2${before ? `&before=${before}` : ""}`);
      expect(page.messages.length).toBeLessThanOrEqual(2);
      seen.unshift(...texts(page.messages));
      if (!page.hasMore) break;
      before = page.nextBefore;
    }
    expect(seen).toEqual([
      "user:q1",
      "assistant:a-q1",
      "user:q2",
      "user:q3",
      "assistant:a-q3",
      "user:q4",
      "user:q5",
      "assistant:a-q5",
      "user:q6",
    ]);
  });

  it("rows written before the marking existed are marked once by the schema migration", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.lastUser === "quiet please" ? "NO_REPLY" : "hello back"));
    const key = requesterKey("hist-migrate");
    await sendAndWait(key, "hi");
    await sendAndWait(key, "quiet please");
    // As an older version wrote them: nothing marked, the schema one step behind.
    await runInDurableObject(sessionStub(key), (_obj, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE messages SET is_tool = 0");
      sql.exec("UPDATE message_heads SET is_tool = 0");
      // Back to just before the marking step: the tables and index of the steps appended after it
      // (src/session/schema.ts: the event log, the completion-event marking, compaction; the task ledger's step re-runs
      // harmlessly) go, so they run again too.
      sql.exec("DROP TABLE events");
      sql.exec("DROP TABLE compactions");
      sql.exec("DROP INDEX messages_turns");
      sql.exec("UPDATE schema_version SET version = version - 5");
    });
    expect(texts((await history(key, "limit=50")).messages)).toContain("assistant:NO_REPLY");
    await runInDurableObject(sessionStub(key), (_obj, state) => migrate(state.storage.sql));
    expect(texts((await history(key, "limit=50")).messages)).toEqual([
      "user:hi",
      "assistant:hello back",
      "user:quiet please",
    ]);
  });
});

import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import { SEARCH_SCAN_ROWS } from "../../src/registry/registry-object";
import { sessionIndex } from "../../src/registry/session-index";
import { call, invoke, sendAndWait } from "../helpers/http";
import { syntheticIndexEntries } from "../helpers/index-rows";

/**
 * No silent drops (docs/contract.md, "Tools"): every classic tool's zod schema is strict, so a parameter it
 * does not know — OpenClaw's newer ones included — is a 400 naming it; the newer parameters that map to
 * what the gateway has work: `label`, `agentId` and `search` on sessions_list, `offset` on sessions_history.
 */

const uid = () => crypto.randomUUID().slice(0, 8);

describe("unknown parameters are refused by name", () => {
  it.each([
    ["sessions_list", { activeOnly: true }, "activeOnly: unknown parameter for sessions_list"],
    [
      "sessions_list",
      { relationship: "owned", include_derived_titles: true },
      "relationship, includeDerivedTitles: unknown parameters for sessions_list",
    ],
    // `mode` and `watch` are supported (test/tools/sessions-send-modes.test.ts, test/events/watchers.test.ts).
    [
      "sessions_send",
      { sessionKey: "main", message: "hi", unwatch: true },
      "unwatch: unknown parameter for sessions_send",
    ],
    // `messageId`/`sessionId` are supported (test/tools/sessions-history.test.ts); `pendingBefore` is not.
    [
      "sessions_history",
      { sessionKey: "main", pendingBefore: 1 },
      "pendingBefore: unknown parameter for sessions_history",
    ],
    ["agents_list", { verbose: true }, "verbose: unknown parameter for agents_list"],
  ])("%s %j → 400", async (tool, args, message) => {
    const r = await invoke(tool, args);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ ok: false, error: { type: "invalid_request", message } });
  });

  it("the served JSON Schemas (/v1/tools, MCP, models' tools) close every classic tool's parameters", async () => {
    const served = (await call("GET", "/v1/tools")).json.tools as { name: string; parameters: any }[];
    for (const name of ["sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "agents_list"])
      expect(served.find((t) => t.name === name)?.parameters.additionalProperties, name).toBe(false);
    const list = served.find((t) => t.name === "sessions_list")!.parameters.properties;
    expect(Object.keys(list)).toEqual(expect.arrayContaining(["label", "agentId", "search"]));
    expect(Object.keys(served.find((t) => t.name === "sessions_history")!.parameters.properties)).toContain("offset");
  });
});

describe("sessions_list: label, agentId, search", () => {
  async function seed(agentId: string, rows: { key: string; updatedAt: number; label?: string }[]) {
    await sessionIndex(env, loadConfig(env), agentId).upsertMany(syntheticIndexEntries(rows));
  }

  it("filter the visible rows: label exactly, agentId among the agents the caller may see, search in key/label/sessionId", async () => {
    const a = `la${uid()}`;
    const b = `lb${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { [a]: { default: true }, [b]: {} } },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    const now = Date.now();
    await seed(a, [
      { key: `agent:${a}:alpha`, updatedAt: now - 1, label: "Nightly Report" },
      { key: `agent:${a}:beta`, updatedAt: now - 2, label: "nightly report" },
      { key: `agent:${a}:gamma-search-me`, updatedAt: now - 3 },
    ]);
    await seed(b, [{ key: `agent:${b}:delta`, updatedAt: now - 4, label: "Nightly Report" }]);
    const keys = async (args: Record<string, unknown>) =>
      (await invoke("sessions_list", args, { sessionKey: `agent:${a}:main` })).details.sessions.map((s: any) => s.key);
    expect(await keys({ label: "Nightly Report" })).toEqual([`agent:${a}:alpha`, `agent:${b}:delta`]);
    expect(await keys({ label: "Nightly Report", agentId: b })).toEqual([`agent:${b}:delta`]);
    expect(await keys({ agentId: "nobody" })).toEqual([]);
    expect(await keys({ search: "NIGHTLY" })).toEqual([`agent:${a}:alpha`, `agent:${a}:beta`, `agent:${b}:delta`]);
    expect(await keys({ search: "search-me" })).toEqual([`agent:${a}:gamma-search-me`]);
    const sid = (await invoke("sessions_list", { agentId: b }, { sessionKey: `agent:${a}:main` })).details.sessions[0]
      .sessionId as string;
    expect(await keys({ search: sid.slice(0, 13) })).toEqual([`agent:${b}:delta`]);
    // Without cross-agent access, another agent's id lists nothing.
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { [a]: { default: true }, [b]: {} } },
    });
    expect(await keys({ agentId: b })).toEqual([]);
  });

  it(`a search page scans at most ${SEARCH_SCAN_ROWS} rows per shard and goes on from where it stopped`, async () => {
    const agent = `ls${uid()}`;
    setConfigOverride({
      agents: { defaults: { model: "builtin/echo" }, entries: { [agent]: { default: true, indexShards: 1 } } },
      tools: { sessions: { visibility: "agent" } },
    });
    const now = Date.now();
    // The only match is the oldest of 2,100 rows: beyond the first page's scan.
    const rows = Array.from({ length: 2100 }, (_, i) => ({ key: `agent:${agent}:row-${i}`, updatedAt: now - i }));
    rows[2099].key = `agent:${agent}:needle`;
    for (let i = 0; i < rows.length; i += 500) await seed(agent, rows.slice(i, i + 500));
    const first = (
      await invoke("sessions_list", { search: "needle", limit: 10 }, { sessionKey: `agent:${agent}:main` })
    ).details;
    expect(first.sessions).toEqual([]);
    expect(first.nextCursor).toBeDefined();
    const second = (
      await invoke(
        "sessions_list",
        { search: "needle", limit: 10, cursor: first.nextCursor },
        { sessionKey: `agent:${agent}:main` },
      )
    ).details;
    expect(second.sessions.map((s: any) => s.key)).toEqual([`agent:${agent}:needle`]);
    expect(second.nextCursor).toBeUndefined();
  });
});

describe("sessions_history: offset", () => {
  it("skips the newest messages and pages on with nextOffset; not with before; bounded", async () => {
    const key = `agent:main:offset-${uid()}`;
    setConfigOverride({ agents: { defaults: { model: "builtin/echo" }, entries: { main: {} } } });
    for (let i = 1; i <= 5; i++) await sendAndWait(key, `m${i}`);
    const page = async (args: Record<string, unknown>) =>
      (await invoke("sessions_history", { sessionKey: key, ...args }, { sessionKey: key })).details;
    const texts = (d: any) => d.messages.map((m: any) => m.content[0].text);
    // 10 messages (5 sends, 5 echoes): skip the newest 4, take 3.
    const p1 = await page({ offset: 4, limit: 3 });
    expect(texts(p1)).toEqual(["m2", "m3", "m3"]);
    expect(p1).toMatchObject({ offset: 4, nextOffset: 7, hasMore: true });
    const p2 = await page({ offset: p1.nextOffset, limit: 3 });
    expect(texts(p2)).toEqual(["m1", "m1", "m2"]);
    expect(p2).toMatchObject({ offset: 7, hasMore: false });
    expect(p2.nextOffset).toBeUndefined();
    expect((await page({ offset: 0, limit: 2 })).nextOffset).toBe(2);
    const both = await invoke("sessions_history", { sessionKey: key, offset: 1, before: 3 }, { sessionKey: key });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toBe("offset: not with before (page with one of them)");
    expect((await invoke("sessions_history", { sessionKey: key, offset: 100_001 })).status).toBe(400);
  });
});

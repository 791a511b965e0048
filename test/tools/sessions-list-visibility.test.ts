import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load";
import { sessionIndex } from "../../src/registry/session-index";
import { call } from "../helpers/http";
import type { SyntheticRow } from "../helpers/index-rows";
import { configure, keysOf, list, rowsRead, seed, walk } from "../helpers/listing";

describe("sessions_list visibility", () => {
  async function seedTree(agent: string) {
    const t = Date.now() - 60_000;
    const me = `agent:${agent}:main`;
    // 30 sessions the caller must not see, all newer than the 5 it may see.
    const hidden = Array.from({ length: 30 }, (_, i) => ({
      key: `agent:${agent}:other-${i}`,
      updatedAt: t + 1000 + i,
    }));
    const grandchild = {
      key: `agent:${agent}:subagent:gc`,
      updatedAt: t + 2000,
      spawnedBy: `agent:${agent}:subagent:c0`,
    };
    const visible = [
      { key: me, updatedAt: t + 1 },
      ...Array.from({ length: 4 }, (_, i) => ({
        key: `agent:${agent}:subagent:c${i}`,
        updatedAt: t + 10 + i,
        spawnedBy: me,
      })),
    ];
    await seed(agent, [...hidden, grandchild, ...visible]);
    return { me, visible: visible.map((v) => v.key).reverse(), hidden: hidden.map((h) => h.key) };
  }

  it("tree (default): own session + direct children; full pages for a scoped caller", async () => {
    configure(["tree"]);
    const { me, visible } = await seedTree("tree");
    const first = await list({ limit: 3 }, me);
    expect(first.details).toMatchObject({ count: 3, visibility: "tree" });
    expect(keysOf(first)).toEqual(visible.slice(0, 3));
    const { keys, sizes } = await walk({ limit: 3 }, me);
    expect(keys).toEqual(visible);
    expect(sizes).toEqual([3, 2]);
  });

  it("a page after a cursor reads that page, not the rows before the cursor", async () => {
    // 16 fixed shards (the old default; unset, the index starts at one object and sizes itself).
    configure(["paged"], { session: { indexShards: 16 } });
    const rows: SyntheticRow[] = [];
    for (let n = 0; n < 3_200; n++)
      rows.push({ key: `agent:paged:s${String(n).padStart(4, "0")}`, updatedAt: 100 + n });
    await seed("paged", rows);
    const index = sessionIndex(env, loadConfig(env), "paged");
    // A cursor two thirds down the listing: ~133 rows of each shard are newer than it.
    const cursor = { updatedAt: 100 + 1_066, key: "agent:paged:s1066" };
    let read = 0;
    let listed = 0;
    for (const shard of index.allShards()) {
      const { rows: r, result } = await rowsRead(shard, (o) => o.list({ scope: { type: "agent" }, limit: 9, cursor }));
      read += r;
      listed += result.keys.length;
      expect(result.updatedAt.every((t) => t < cursor.updatedAt)).toBe(true);
    }
    expect(listed).toBe(16 * 9);
    // Each shard reads its 9 rows and the one that tells it more follow; the cursor's own shard also its row.
    expect(read).toBeLessThanOrEqual(16 * 10 + 1);
  });

  it("a tree page reads only the caller's children in each shard, not the shard's other rows", async () => {
    configure(["deep"], { session: { indexShards: 16 } });
    const me = "agent:deep:main";
    // 3,200 sessions over the agent's 16 shards, 32 of them the caller's children: ~200 rows and ~2 children a shard.
    const rows: SyntheticRow[] = [{ key: me, updatedAt: 10 }];
    for (let n = 0; n < 3_200; n++)
      rows.push({ key: `agent:deep:s${n}`, updatedAt: 100 + n, ...(n % 100 === 0 ? { spawnedBy: me } : {}) });
    await seed("deep", rows);
    const index = sessionIndex(env, loadConfig(env), "deep");
    let read = 0;
    let listed = 0;
    for (const shard of index.allShards()) {
      const { rows, result } = await rowsRead(shard, (o) => o.list({ scope: { type: "tree", key: me }, limit: 50 }));
      read += rows;
      listed += result.keys.length;
    }
    expect(listed).toBe(33);
    // The children and the caller's own row, give or take each lookup's one step past its last match.
    expect(read).toBeLessThanOrEqual(33 + 2 * 16);
  });

  it("self: only the requester's own session", async () => {
    configure(["selfv"], { tools: { sessions: { visibility: "SELF" } } });
    const { me } = await seedTree("selfv");
    const r = await list({ limit: 3 }, me);
    expect(r.details).toMatchObject({ count: 1, visibility: "self" });
    expect(keysOf(r)).toEqual([me]);
  });

  it("agent: every session of the agent, none of another agent", async () => {
    configure(["agentv", "otherv"], { tools: { sessions: { visibility: "agent" } } });
    const { me, visible, hidden } = await seedTree("agentv");
    await seed("otherv", [{ key: "agent:otherv:main", updatedAt: Date.now() }]);
    const { keys } = await walk({ limit: 7 }, me);
    expect(keys).toHaveLength(visible.length + hidden.length + 1);
    expect(keys.some((k) => k.startsWith("agent:otherv:"))).toBe(false);
  });

  it("all: other agents' shards are merged by updatedAt only when tools.agentToAgent allows", async () => {
    const t = Date.now() - 60_000;
    configure(["alla", "allb", "allc"], { tools: { sessions: { visibility: "all" } } });
    await seed("alla", [
      { key: "agent:alla:main", updatedAt: t + 1 },
      { key: "agent:alla:x", updatedAt: t + 4 },
    ]);
    await seed("allb", [
      { key: "agent:allb:main", updatedAt: t + 3 },
      { key: "agent:allb:y", updatedAt: t + 6 },
    ]);
    await seed("allc", [{ key: "agent:allc:main", updatedAt: t + 5 }]);
    // a2a disabled: cross-agent rows are hidden.
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual(["agent:alla:x", "agent:alla:main"]);
    configure(["alla", "allb", "allc"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["alla", "allb"] } },
    });
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual([
      "agent:allb:y",
      "agent:alla:x",
      "agent:allb:main",
      "agent:alla:main",
    ]);
    const { keys, sizes } = await walk({ limit: 1 }, "agent:alla:main");
    expect(keys).toEqual(["agent:allb:y", "agent:alla:x", "agent:allb:main", "agent:alla:main"]);
    expect(sizes).toEqual([1, 1, 1, 1]);
    configure(["alla", "allb", "allc"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    expect(keysOf(await list({}, "agent:alla:main"))).toEqual([
      "agent:allb:y",
      "agent:allc:main",
      "agent:alla:x",
      "agent:allb:main",
      "agent:alla:main",
    ]);
  });

  it("sandboxed callers are clamped to spawned-only (tree) even under visibility all; clamp `all` lifts it", async () => {
    configure(["sbx", "peer"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      agents: { defaults: { sandbox: { mode: "all" } } },
    });
    const { me, visible } = await seedTree("sbx");
    await seed("peer", [{ key: "agent:peer:main", updatedAt: Date.now() }]);
    const r = await list({ limit: 200 }, me);
    expect(r.details.visibility).toBe("tree");
    expect(keysOf(r)).toEqual(visible);
    configure(["sbx", "peer"], {
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["*"] } },
      agents: { defaults: { sandbox: { mode: "all", sessionToolsVisibility: "all" } } },
    });
    const lifted = await list({ limit: 200 }, me);
    expect(lifted.details.visibility).toBe("all");
    expect(keysOf(lifted)).toContain("agent:peer:main");
  });
});

describe("GET /v1/sessions (operator listing)", () => {
  it("lists an agent's sessions with a cursor, and filters kinds", async () => {
    configure(["rest", "restb"]);
    const t = Date.now() - 5000;
    await seed(
      "rest",
      Array.from({ length: 7 }, (_, i) => ({
        key: i === 0 ? "agent:rest:cron:c" : `agent:rest:r${i}`,
        updatedAt: t + i,
      })),
    );
    const keys: string[] = [];
    let cursor: string | null = null;
    do {
      const r: { status: number; json: any } = await call(
        "GET",
        `/v1/sessions?agentId=rest&limit=3${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(r.status).toBe(200);
      keys.push(...r.json.sessions.map((s: any) => s.key));
      cursor = r.json.nextCursor;
    } while (cursor);
    expect(keys).toEqual([
      "agent:rest:r6",
      "agent:rest:r5",
      "agent:rest:r4",
      "agent:rest:r3",
      "agent:rest:r2",
      "agent:rest:r1",
      "agent:rest:cron:c",
    ]);
    const cron = await call("GET", "/v1/sessions?agentId=rest&kinds=cron");
    expect(cron.json.sessions.map((s: any) => s.key)).toEqual(["agent:rest:cron:c"]);
  });
});

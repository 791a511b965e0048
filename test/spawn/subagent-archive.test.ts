import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { type SessionObject, SessionObject as SessionObjectClass } from "../../src/session/session-object";
import { ARCHIVE_PART_BYTES, archivePrefix } from "../../src/spawn/archive";
import { archiveStatus } from "../../src/spawn/archive-read";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { crash, evict } from "../helpers/restart";
import { announcesIn, childState, installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

const MIN = 60_000;

async function listedChildren(req: string): Promise<string[]> {
  const r = await invoke("sessions_list", {}, { sessionKey: req });
  return (r.details.sessions as { key: string }[]).map((s) => s.key).filter((k) => k.includes(":subagent:"));
}

async function spawnDone(config: Record<string, any> = {}, args: Record<string, unknown> = {}) {
  setConfigOverride(subagentConfig(config));
  installFakes((c) => (c.step === "task" ? "result" : c.step === "announce" ? "notes" : "hi"));
  const req = requesterKey("archive");
  const r = await invoke("sessions_spawn", { task: "archive me", ...args }, { sessionKey: req });
  expect(r.details.status).toBe("accepted");
  const child: string = r.details.childSessionKey;
  const state = await settle(child);
  return { req, child, state };
}

describe("sub-agent archival (cleanup keep)", () => {
  it("is archived archiveAfterMinutes (default 60) after it ends: transcript exported to R2, storage cleared, gone from the listing", async () => {
    const { req, child, state } = await spawnDone();
    expect(await announcesIn(req, child)).toHaveLength(1);
    expect(await listedChildren(req)).toEqual([child]);
    expect(state.timers.map((t) => t.kind)).toContain("subagent-archive");

    await advance(child, 59 * MIN);
    expect((await childState(child)).exists).toBe(true);
    await advance(child, 1 * MIN);

    expect(await childState(child)).toMatchObject({ exists: false });
    // Its storage is freed, but it stays readable from the archive, marked archived (and is no longer listed).
    const row = await call("GET", `/v1/sessions/${enc(child)}`);
    expect(row.status).toBe(200);
    expect(row.json).toMatchObject({
      key: child,
      sessionId: state.meta.sessionId,
      spawnedBy: req,
      archived: true,
      transcriptPath: `/v1/sessions/${enc(child)}/transcript.jsonl`,
    });
    const hist = (await call("GET", `/v1/sessions/${enc(child)}/history?limit=50`)).json;
    expect(hist).toMatchObject({ archived: true, sessionId: state.meta.sessionId, hasMore: false });
    // The announce step's prompt is hidden there too; its reply (the notes) is not.
    expect(hist.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "assistant"]);
    expect(hist.messages.slice(1).map((m: any) => m.content[0].text)).toEqual(["result", "notes"]);
    // The requester's sessions_history reads its archived child the same way.
    const viaTool = await invoke("sessions_history", { sessionKey: child, includeTools: true }, { sessionKey: req });
    expect(viaTool.details).toMatchObject({ archived: true });
    expect(viaTool.details.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    const jsonl = await call("GET", `/v1/sessions/${enc(child)}/transcript.jsonl`);
    expect(jsonl.status).toBe(200);
    expect(jsonl.headers.get("X-Switchboard-Archived")).toBe("true");
    expect(
      (jsonl.json as string)
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).type),
    ).toEqual(["session", "message", "message", "message", "message"]);
    expect(await listedChildren(req)).toEqual([]);
    // The requester keeps its record of the announce.
    expect(await announcesIn(req, child)).toHaveLength(1);

    const obj = await env.ARCHIVE!.get(`${archivePrefix("main", state.meta.sessionId)}.jsonl`);
    expect(obj).not.toBeNull();
    expect(obj!.customMetadata).toMatchObject({ sessionKey: child, spawnedBy: req });
    const lines = (await obj!.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: "session", id: state.meta.sessionId, key: child });
    expect(lines.slice(1).map((l) => l.message.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(lines[1].message.content[0].text).toContain("[Subagent Task]: archive me");
  });

  it("without the ARCHIVE binding: archival keeps the session (its only copy) — no R2 write, no retry, no dead timer", async () => {
    // The test config binds a bucket; hide it from the session objects, as a deployment without R2 has none.
    const real = Object.getOwnPropertyDescriptor(SessionObjectClass.prototype, "bindings")!.get!;
    vi.spyOn(SessionObjectClass.prototype, "bindings", "get").mockImplementation(function (this: SessionObject) {
      return new Proxy(real.call(this) as Env, {
        get: (target, prop) => (prop === "ARCHIVE" ? undefined : Reflect.get(target, prop)),
      });
    });
    const { req, child, state } = await spawnDone();
    expect(state.timers.map((t) => t.kind)).toContain("subagent-archive");
    await advance(child, 60 * MIN);
    const after = await childState(child);
    expect(after.timers.filter((t) => t.kind === "subagent-archive")).toEqual([]);
    expect((await call("GET", `/v1/sessions/${enc(child)}/timers/dead`)).json.count).toBe(0);
    expect(await env.ARCHIVE!.get(`${archivePrefix("main", state.meta.sessionId)}.jsonl`)).toBeNull();
    expect(await announcesIn(req, child)).toHaveLength(1);
    // Kept whole and live: still listed, still readable from its own storage.
    expect(after.exists).toBe(true);
    expect(await listedChildren(req)).toEqual([child]);
    const row = (await call("GET", `/v1/sessions/${enc(child)}`)).json;
    expect(row.key).toBe(child);
    expect(row).not.toHaveProperty("archived");
  });

  it("GET /healthz tells the operator whether archived sub-agents are exported or kept", async () => {
    expect((await call("GET", "/healthz")).json.archive).toEqual({ bucket: true });
    expect((await call("GET", "/healthz", undefined, { token: null })).json).not.toHaveProperty("archive");
    expect(archiveStatus({} as Env)).toEqual({
      bucket: false,
      note: "No ARCHIVE R2 bucket is bound: sub-agents due for archival are kept (their storage is the only copy), not exported and freed.",
    });
  });

  it("a long archived transcript is read page by page from the archive, bounded, and `before` reaches every message", async () => {
    const { child, state } = await spawnDone();
    // 600 more messages (about 3 archive pages), every tenth a NO_REPLY that history hides.
    await runInDurableObject(sessionStub(child), (obj: SessionObject) => {
      for (let i = 1; i <= 600; i++) {
        const msg =
          i % 10 === 0
            ? {
                role: "assistant",
                content: [{ type: "text", text: "NO_REPLY" }],
                api: "x",
                provider: "x",
                model: "x",
                stopReason: "stop",
                timestamp: i,
              }
            : { role: "user", content: [{ type: "text", text: `m${i}` }], timestamp: i };
        obj.transcript.append(msg as any, null);
      }
    });
    await advance(child, 60 * MIN);
    expect((await childState(child)).exists).toBe(false);
    const seen: string[] = [];
    let before: number | null = null;
    let pages = 0;
    for (; pages < 20; pages++) {
      const page: any = (
        await call("GET", `/v1/sessions/${enc(child)}/history?limit=100${before ? `&before=${before}` : ""}`)
      ).json;
      expect(page.archived).toBe(true);
      expect(page.messages.length).toBeLessThanOrEqual(100);
      seen.unshift(...page.messages.map((m: any) => m.content[0]?.text ?? ""));
      if (!page.hasMore) break;
      before = page.nextBefore;
    }
    const expected = [
      "result",
      "notes",
      ...Array.from({ length: 600 }, (_, n) => n + 1)
        .filter((n) => n % 10 !== 0)
        .map((n) => `m${n}`),
    ];
    expect(seen[0]).toContain("[Subagent Task]: archive me");
    expect(seen.slice(1)).toEqual(expected);
    expect(pages).toBeGreaterThanOrEqual(5);
    const pageKeys = (
      await env.ARCHIVE!.list({ prefix: `${archivePrefix("main", state.meta.sessionId)}/history/` })
    ).objects.map((o) => o.key);
    expect(pageKeys.length).toBeGreaterThanOrEqual(4);
  });

  it("archiveAfterMinutes is configurable; 0 never archives", async () => {
    const five = await spawnDone({ subagents: { archiveAfterMinutes: 5 } });
    await advance(five.child, 5 * MIN);
    expect((await childState(five.child)).exists).toBe(false);

    const never = await spawnDone({ subagents: { archiveAfterMinutes: 0 } });
    expect(never.state.timers.map((t) => t.kind)).not.toContain("subagent-archive");
    await advance(never.child, 30 * 24 * 60 * MIN);
    expect((await childState(never.child)).exists).toBe(true);
    expect(await listedChildren(never.req)).toEqual([never.child]);
  });

  it("attachments are removed with the child, and exported to R2 only with retainOnSessionKeep", async () => {
    const files = [{ name: "a.txt", content: "alpha" }];
    const dropped = await spawnDone(
      { tools: { sessions_spawn: { attachments: { enabled: true } } } },
      { attachments: files },
    );
    expect(dropped.state.attachments).toEqual(["a.txt"]);
    await advance(dropped.child, 60 * MIN);
    expect((await childState(dropped.child)).exists).toBe(false);
    expect(
      await env.ARCHIVE!.get(`${archivePrefix("main", dropped.state.meta.sessionId)}/attachments/a.txt`),
    ).toBeNull();

    const kept = await spawnDone(
      { tools: { sessions_spawn: { attachments: { enabled: true, retainOnSessionKeep: true } } } },
      { attachments: files },
    );
    await advance(kept.child, 60 * MIN);
    expect((await childState(kept.child)).exists).toBe(false);
    const obj = await env.ARCHIVE!.get(`${archivePrefix("main", kept.state.meta.sessionId)}/attachments/a.txt`);
    expect(await obj!.text()).toBe("alpha");
  });

  it("a transcript larger than one R2 part is exported whole, in order, through a multipart upload", async () => {
    const { child, state } = await spawnDone();
    // ~12 MiB of transcript: more than two 5 MiB parts, so the last part is a remainder.
    const big = "x".repeat(240 * 1024);
    await runInDurableObject(sessionStub(child), async (obj: SessionObject) => {
      for (let n = 0; n < 50; n++)
        obj.transcript.append(
          { role: "user", content: [{ type: "text", text: `${n}:${big}` }], timestamp: Date.now() },
          null,
        );
    });
    const multipart = vi.spyOn(env.ARCHIVE!, "createMultipartUpload");
    await advance(child, 60 * MIN);
    expect((await childState(child)).exists).toBe(false);

    const obj = await env.ARCHIVE!.get(`${archivePrefix("main", state.meta.sessionId)}.jsonl`);
    expect(obj!.size).toBeGreaterThan(2 * ARCHIVE_PART_BYTES);
    const lines = (await obj!.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1 + 4 + 50);
    expect(lines.slice(5).map((l) => l.message.content[0].text.split(":")[0])).toEqual(
      Array.from({ length: 50 }, (_, n) => String(n)),
    );
    expect(lines.map((l) => l.seq).slice(1)).toEqual([...lines.map((l) => l.seq).slice(1)].sort((a, b) => a - b));
    expect(lines[54].message.content[0].text).toBe(`49:${big}`);
    // The spy sees the object's calls when the binding is shared with the test isolate (it is under @cloudflare/vitest-plugin).
    expect(multipart).toHaveBeenCalledTimes(1);
  });

  it("survives eviction: the archive timer is a row, not memory", async () => {
    const { req, child } = await spawnDone();
    await evict(sessionStub(req), sessionStub(child));
    await advance(child, 60 * MIN);
    expect((await childState(child)).exists).toBe(false);
    expect(await listedChildren(req)).toEqual([]);
  });
});

describe("nested sub-agents", () => {
  it("a child whose sub-agent requester is already gone settles without resurrecting it", async () => {
    setConfigOverride(
      subagentConfig({
        subagents: { maxSpawnDepth: 2 },
        tools: { subagents: { tools: { allow: ["sessions_spawn"] } } },
      }),
    );
    let hang = true;
    installFakes((c) =>
      c.step === "task" && hang && c.lastUser.includes("grandchild") ? "hang" : c.step === "task" ? "r" : "n",
    );
    const parent = (await invoke("sessions_spawn", { task: "parent" }, { sessionKey: requesterKey("nested") })).details
      .childSessionKey as string;
    await settle(parent);
    const grandchild = (
      await invoke("sessions_spawn", { task: "grandchild", runTimeoutSeconds: 5 }, { sessionKey: parent })
    ).details.childSessionKey as string;
    expect(grandchild).toMatch(/^agent:main:subagent:/);
    expect((await call("DELETE", `/v1/sessions/${enc(parent)}`)).status).toBe(200);
    hang = false;
    await advance(grandchild, 5_000);
    const s = await settle(grandchild);
    expect(s.flows.find((f) => f.id.startsWith("announce:"))!.state).toBe("done");
    expect(await sessionStub(parent).getMeta()).toBeNull();
  });
});

describe("sub-agent deletion (cleanup delete)", () => {
  it("deletes the child right after its announce is handed off (no archive export)", async () => {
    const { req, child, state } = await spawnDone({}, { cleanup: "delete" });
    expect(state.exists).toBe(false);
    expect(await announcesIn(req, child)).toHaveLength(1);
    expect(await listedChildren(req)).toEqual([]);
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).status).toBe(404);
  });

  it("survives eviction mid-run: the lost run is retried from its lease, then announced once and deleted", async () => {
    setConfigOverride(subagentConfig());
    let hang = true;
    installFakes((c) => (c.step === "task" && hang ? "hang" : c.step === "task" ? "late result" : "notes"));
    const req = requesterKey("evict-delete");
    const r = await invoke("sessions_spawn", { task: "evict me", cleanup: "delete" }, { sessionKey: req });
    const child: string = r.details.childSessionKey;
    expect((await childState(child)).pendingRuns).toHaveLength(1);
    await crash(sessionStub(req), sessionStub(child));
    hang = false;
    // The lease timer notices the lost executor and re-queues the run.
    await advance(child, 60_000);
    const state = await settle(child);
    expect(state.exists).toBe(false);
    const msgs = await announcesIn(req, child);
    expect(msgs).toHaveLength(1);
    expect(msgs[0].text).toMatch(/^Status: completed successfully\nResult: late result\nNotes: notes\n/);
    expect(await sessionStub(child).getMeta()).toBeNull();
  });
});

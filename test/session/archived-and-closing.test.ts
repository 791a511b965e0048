import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { SessionObject } from "../../src/session/session-object";
import { archivePrefix } from "../../src/spawn/archive";
import { ARCHIVE_READ_MAX_BYTES } from "../../src/spawn/archive-read";
import { subagentLifecycleExtension } from "../../src/spawn/subagent-lifecycle";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { until } from "../helpers/scripted";
import { announcesIn, childState, installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/**
 * Nothing answered 2xx is lost, nothing archived is unreachable (docs/contract.md, "Archived sessions";
 * src/session/closing.ts): an announce handed to a requester that is being deleted is refused and retried,
 * never answered "recorded" and wiped; an archived session can be deleted with its archive, and a write to its
 * key is a 409 instead of a live session hiding the archive; an archived history read costs what it answers.
 */

const MIN = 60_000;

async function doneChild(tag: string) {
  setConfigOverride(subagentConfig());
  installFakes((c) => (c.step === "task" ? "result" : c.step === "announce" ? "notes" : "hi"));
  const req = requesterKey(tag);
  const r = await invoke("sessions_spawn", { task: "archive me" }, { sessionKey: req });
  const child: string = r.details.childSessionKey;
  const state = await settle(child);
  return { req, child, sessionId: state.meta.sessionId as string };
}

describe("an announce racing its requester's delete", () => {
  it("is refused while the requester is being deleted (never recorded, then wiped), and lands once the delete is over", async () => {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "result" : c.step === "announce" ? "notes" : "hi"));
    // The child's hand-off waits until the requester's delete is under way.
    let handOff = false;
    const onTimer = subagentLifecycleExtension.onTimer!;
    vi.spyOn(subagentLifecycleExtension, "onTimer").mockImplementation(async (host, timer) => {
      if (timer.kind === "subagent-handoff" && !handOff) throw new Error("held by the test");
      return onTimer(host, timer);
    });
    // The requester's delete is held inside its beforeDelete (where the real one awaits other objects).
    let entered!: () => void;
    let release!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const held = new Promise<void>((r) => (release = r));
    const beforeDelete = subagentLifecycleExtension.beforeDelete!;
    const req = requesterKey("closing");
    vi.spyOn(subagentLifecycleExtension, "beforeDelete").mockImplementation(async (host) => {
      await beforeDelete(host);
      if (host.key === req) {
        entered();
        await held;
      }
    });

    const child = (await invoke("sessions_spawn", { task: "job" }, { sessionKey: req })).details.childSessionKey;
    await until(async () =>
      expect((await childState(child)).flows.some((f) => f.id.startsWith("announce:") && f.state === "handoff")).toBe(
        true,
      ),
    );
    const deleting = call("DELETE", `/v1/sessions/${enc(req)}`);
    await inside;
    handOff = true;
    await advance(child, MIN);
    // Refused (409): the child keeps its announce and retries later.
    const during = await childState(child);
    expect(during.flows.find((f) => f.id.startsWith("announce:") && !f.id.startsWith("announce:v1:"))?.state).toBe(
      "handoff",
    );
    release();
    expect((await deleting).status).toBe(200);
    // After the delete the key is open again: the retried hand-off is recorded there.
    await advance(child, 10 * MIN);
    await until(async () => expect(await announcesIn(req, child)).toHaveLength(1));
    expect((await childState(child)).flows.find((f) => f.id === during.flows[0].id)?.state ?? "done").toBe("done");
  });
});

describe("archived sessions", () => {
  it("DELETE removes an archived session: its archive objects and its index row; the key is then free", async () => {
    const { child, sessionId } = await doneChild("archived-delete");
    await advance(child, 60 * MIN);
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).json.archived).toBe(true);
    const prefix = archivePrefix("main", sessionId);
    expect((await env.ARCHIVE!.list({ prefix })).objects.length).toBeGreaterThan(1);

    const del = await call("DELETE", `/v1/sessions/${enc(child)}`);
    expect(del.json).toEqual({ ok: true, deleted: child });
    expect((await env.ARCHIVE!.list({ prefix })).objects).toEqual([]);
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).status).toBe(404);
    expect((await call("GET", `/v1/sessions/${enc(child)}/transcript.jsonl`)).status).toBe(404);
    expect((await call("DELETE", `/v1/sessions/${enc(child)}`)).status).toBe(404);
    // Free again: a message creates a new, live session.
    expect((await call("POST", `/v1/sessions/${enc(child)}/messages`, { message: "new life" })).status).toBe(202);
  });

  it("a write to an archived key is refused (409), and the archive stays what GET shows", async () => {
    const { req, child } = await doneChild("archived-write");
    await advance(child, 60 * MIN);
    const before = (await call("GET", `/v1/sessions/${enc(child)}`)).json;
    expect(before.archived).toBe(true);

    const msg = await call("POST", `/v1/sessions/${enc(child)}/messages`, { message: "hello?" });
    expect(msg.status).toBe(409);
    expect(msg.json.error.message).toMatch(/is archived and read-only/);
    expect((await call("PATCH", `/v1/sessions/${enc(child)}`, { label: "renamed" })).status).toBe(409);
    setConfigOverride(subagentConfig({ tools: { sessions: { visibility: "all" } } }));
    const sent = await invoke(
      "sessions_send",
      { sessionKey: child, message: "ping", timeoutSeconds: 0 },
      { sessionKey: req },
    );
    expect(sent.details).toMatchObject({ status: "error", error: expect.stringMatching(/is archived and read-only/) });

    // Nothing was created: no live object, and the archived row is intact.
    expect((await childState(child)).exists).toBe(false);
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).json).toEqual(before);
    const history = (await call("GET", `/v1/sessions/${enc(child)}/history`)).json;
    expect(history.archived).toBe(true);
  });

  it("an archived history page reads about what it answers from the bucket, not the full messages", async () => {
    const { child } = await doneChild("archived-bounded");
    // 40 messages of 200 KB: 8 MB of transcript.
    await runInDurableObject(sessionStub(child), (obj: SessionObject) => {
      for (let i = 1; i <= 40; i++)
        obj.transcript.append(
          { role: "user", content: [{ type: "text", text: `m${i} ${"x".repeat(200_000)}` }], timestamp: i },
          null,
        );
    });
    await advance(child, 60 * MIN);
    let read = 0;
    const get = env.ARCHIVE!.get.bind(env.ARCHIVE!);
    vi.spyOn(env.ARCHIVE!, "get").mockImplementation((async (key: string, opts?: R2GetOptions) => {
      const obj = await get(key, opts);
      if (obj && "size" in obj) read += obj.size;
      return obj;
    }) as typeof env.ARCHIVE.get);
    const page = (await call("GET", `/v1/sessions/${enc(child)}/history?limit=50`)).json;
    expect(page.archived).toBe(true);
    expect(page.messages.length).toBeGreaterThan(1);
    expect(page.messages.at(-1).content[0].text).toMatch(/^m40 x+/);
    expect(page.hasMore).toBe(true);
    expect(page.bytes).toBeLessThanOrEqual(80 * 1024);
    expect(read).toBeLessThanOrEqual(ARCHIVE_READ_MAX_BYTES);
    // And every message is still reachable with `before`.
    const seen = new Set<string>();
    for (let before: number | null = null, i = 0; i < 60; i++) {
      const p: any = (
        await call("GET", `/v1/sessions/${enc(child)}/history?limit=50${before ? `&before=${before}` : ""}`)
      ).json;
      for (const m of p.messages) seen.add(/^(m\d+) /.exec(m.content[0]?.text ?? "")?.[1] ?? "");
      if (!p.hasMore) break;
      before = p.nextBefore;
    }
    expect([...seen].filter((s) => s.startsWith("m")).length).toBe(40);
  });
});

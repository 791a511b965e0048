import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import { SessionObject } from "../../src/session/session-object";
import { ACCEPTED_NOTE_SESSION } from "../../src/spawn/subagent-prompt";
import { threadBindingOf } from "../../src/spawn/thread-binding";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { evict } from "../helpers/restart";
import {
  announcesIn,
  childState,
  HOOK_URL,
  installFakes,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * Our design (docs/subagents.md): `thread: true` binds `<requester>:thread:<child uuid>` to the child.
 * Follow-ups posted to that key run in the child, its announce and replies go to that thread, and the
 * binding ends with the child.
 */

const MIN = 60_000;

async function spawnThreadBound() {
  setConfigOverride(subagentConfig({ channels: { webchat: { webhookUrl: HOOK_URL, threadBindings: true } } }));
  const fakes = installFakes((c) =>
    c.step === "task" ? "task done" : c.step === "announce" ? "" : `reply to: ${c.lastUser}`,
  );
  const req = requesterKey("thread");
  await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
  const r = await invoke("sessions_spawn", { task: "draft the plan", thread: true }, { sessionKey: req });
  expect(r.details.status).toBe("accepted");
  const child: string = r.details.childSessionKey;
  const uuid = child.slice(child.lastIndexOf(":") + 1);
  return { req, child, uuid, fakes, result: r.details };
}

describe("sessions_spawn thread=true", () => {
  it("accepts in session mode, binds <requester>:thread:<child uuid>, and announces into that thread", async () => {
    const { req, child, uuid, fakes, result } = await spawnThreadBound();
    expect(result).toMatchObject({ mode: "session", note: ACCEPTED_NOTE_SESSION, threadKey: `${req}:thread:${uuid}` });
    expect(await threadBindingOf(env, result.threadKey)).toMatchObject({
      childKey: child,
      route: { channel: "webchat", to: "alice", threadId: uuid },
    });

    await settle(child);
    await runDurableObjectAlarm(sessionStub(req));
    expect(await announcesIn(req, child)).toHaveLength(1);
    const delivered = fakes.hooks.filter((h) => h.body.kind === "subagent_announce");
    expect(delivered).toHaveLength(1);
    expect(delivered[0].body).toMatchObject({ channel: "webchat", to: "alice", threadId: uuid });
  });

  it("a follow-up posted to the thread key runs in the child, and its reply goes back to the thread", async () => {
    const { child, uuid, fakes, result } = await spawnThreadBound();
    await settle(child);
    const post = await call("POST", `/v1/sessions/${enc(result.threadKey)}/messages`, {
      message: "and the budget?",
      channel: "webchat",
      to: "alice",
      deliver: true,
    });
    expect(post.status).toBe(202);
    expect(post.json.sessionKey).toBe(child);
    const run = (await call("GET", `/v1/runs/${post.json.runId}/wait?timeoutMs=10000`)).json;
    expect(run).toMatchObject({ status: "ok", sessionKey: child, reply: "reply to: and the budget?" });
    await runDurableObjectAlarm(sessionStub(child));
    const replies = fakes.hooks.filter((h) => h.body.kind === "reply");
    expect(replies.map((h) => [h.body.message, h.body.threadId, h.body.sessionKey])).toEqual([
      ["reply to: and the budget?", uuid, child],
    ]);
    // The thread key itself never became a session.
    expect((await call("GET", `/v1/sessions/${enc(result.threadKey)}`)).status).toBe(404);
    // A follow-up with no route of its own still replies in the thread.
    const bare = await call("POST", `/v1/sessions/${enc(result.threadKey)}/messages`, {
      message: "thanks",
      deliver: true,
    });
    await call("GET", `/v1/runs/${bare.json.runId}/wait?timeoutMs=10000`);
    await runDurableObjectAlarm(sessionStub(child));
    expect(fakes.hooks.filter((h) => h.body.kind === "reply").map((h) => h.body.threadId)).toEqual([uuid, uuid]);
  });

  it("the binding survives eviction and archiveAfterMinutes: a thread-bound child is never archived", async () => {
    const { req, child, result } = await spawnThreadBound();
    await settle(child);
    await evict(sessionStub(req), sessionStub(child), sessionStub(result.threadKey));
    const during = await call("POST", `/v1/sessions/${enc(result.threadKey)}/messages`, { message: "still there?" });
    expect(during.json.sessionKey).toBe(child);
    await call("GET", `/v1/runs/${during.json.runId}/wait?timeoutMs=10000`);

    // Session-mode children stay for follow-ups (test/spawn/subagent-loose-ends.test.ts): an hour on, the thread still reaches it.
    await advance(child, 60 * MIN);
    expect((await childState(child)).exists).toBe(true);
    const after = await call("POST", `/v1/sessions/${enc(result.threadKey)}/messages`, { message: "hello?" });
    expect(after.status).toBe(202);
    expect(after.json.sessionKey).toBe(child);
    await call("GET", `/v1/runs/${after.json.runId}/wait?timeoutMs=10000`);
  });

  it("deleting the child unbinds the thread; a binding left behind by a lost unbind never resurrects the child", async () => {
    const { child, result } = await spawnThreadBound();
    await settle(child);
    expect((await call("DELETE", `/v1/sessions/${enc(child)}`)).status).toBe(200);
    expect(await threadBindingOf(env, result.threadKey)).toBeNull();

    // As if the unbind had been lost: the binding still names the deleted child.
    await callExtension(sessionStub(result.threadKey), "thread-binding", "bind", {
      childKey: child,
      threadKey: result.threadKey,
      route: { channel: "webchat", to: "alice", threadId: "t" },
    });
    const post = await call("POST", `/v1/sessions/${enc(result.threadKey)}/messages`, { message: "anyone?" });
    expect(post.json.sessionKey).toBe(result.threadKey);
    expect(await sessionStub(child).getMeta()).toBeNull();
    expect(await threadBindingOf(env, result.threadKey)).toBeNull();
  });

  it("a failed bind does not undo the spawn: accepted, no threadKey, and the note says where follow-ups go", async () => {
    const real = SessionObject.prototype.extensionCall;
    vi.spyOn(SessionObject.prototype, "extensionCall").mockImplementation(function (
      this: SessionObject,
      name,
      method,
      arg,
    ) {
      if (name === "thread-binding" && method === "bind") return Promise.reject(new Error("storage unavailable"));
      return real.call(this, name, method, arg);
    });
    const { child, result } = await spawnThreadBound();
    expect(result.status).toBe("accepted");
    expect(result.threadKey).toBeUndefined();
    expect(result.note).toBe(
      `${ACCEPTED_NOTE_SESSION} Thread binding failed (storage unavailable); send follow-ups to childSessionKey instead.`,
    );
    expect((await settle(child)).exists).toBe(true);
  });
});

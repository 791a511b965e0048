import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { migrate } from "../../src/session/schema";
import type { SessionObject } from "../../src/session/session-object";
import { ARCHIVE_TIMER } from "../../src/spawn/child-removal";
import { advance, call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { drive, setup, spawnChildren } from "../helpers/requester-turns";
import { rewindSchemaBefore } from "../helpers/schema-rewind";
import {
  childState,
  HOOK_URL,
  installFakes,
  releaseAndQuiesce,
  requesterKey,
  settle,
  subagentConfig,
} from "../helpers/subagents";

/**
 * Sub-agent behaviour as documented (docs/subagents.md): a thread-bound child stays (it is never archived),
 * and the requester-mode completion event is model context, never a visible message of the conversation.
 */

afterEach(releaseAndQuiesce);

const MIN = 60_000;

describe("a thread-bound (mode session) child stays", () => {
  it("is not archived after archiveAfterMinutes, and a stale archive timer is dropped without archiving", async () => {
    setConfigOverride(subagentConfig({ channels: { webchat: { outbound: { url: HOOK_URL }, threadBindings: true } } }));
    installFakes((c) => (c.step === "task" ? "task done" : c.step === "announce" ? "" : `reply: ${c.lastUser}`));
    const req = requesterKey("stay");
    await sendAndWait(req, "hello", { channel: "webchat", to: "alice" });
    const r = await invoke("sessions_spawn", { task: "stay with me", thread: true }, { sessionKey: req });
    expect(r.details).toMatchObject({ status: "accepted", mode: "session" });
    const child: string = r.details.childSessionKey;
    const state = await settle(child);
    expect(state.timers.map((t) => t.kind)).not.toContain(ARCHIVE_TIMER);
    await advance(child, 120 * MIN);
    expect((await childState(child)).exists).toBe(true);
    expect((await call("GET", `/v1/sessions/${enc(child)}`)).json.archived).toBeUndefined();

    // A timer armed before this rule (an upgrade) fires and is dropped; the child stays.
    await runInDurableObject(sessionStub(child), async (obj: SessionObject) => {
      obj.timers.set(ARCHIVE_TIMER, "child", Date.now());
      await obj.timers.arm();
    });
    await runDurableObjectAlarm(sessionStub(child));
    const after = await childState(child);
    expect(after.exists).toBe(true);
    expect(after.timers.map((t) => t.kind)).not.toContain(ARCHIVE_TIMER);
  });
});

describe("the requester-mode completion event is hidden from the conversation", () => {
  it("sessions_history and list previews show the requester's reply, not the internal completion event", async () => {
    const { req } = await setup();
    const [kid] = await spawnChildren(req, 1);
    await drive(() => [req, kid]);
    const visible = await invoke("sessions_history", { sessionKey: req, limit: 50 }, { sessionKey: req });
    const texts = visible.details.messages.map((m: any) => JSON.stringify(m.content));
    expect(texts.join("\n")).not.toContain("Internal task completion event");
    expect(texts.join("\n")).not.toContain("INTERNAL_CONTEXT");
    expect(texts.some((t: string) => t.includes("relayed:"))).toBe(true);
    const list = await invoke("sessions_list", { messageLimit: 20 }, { sessionKey: req });
    const preview = list.details.sessions.find((s: any) => s.key === req).messages;
    expect(JSON.stringify(preview)).not.toContain("Internal task completion event");
    // Still the model's context, and the whole transcript with includeTools.
    const all = await invoke(
      "sessions_history",
      { sessionKey: req, limit: 50, includeTools: true },
      { sessionKey: req },
    );
    expect(JSON.stringify(all.details.messages)).toContain("Internal task completion event");
  });

  it("completion events stored before the rule are hidden once by the schema migration", async () => {
    const { req } = await setup();
    const [kid] = await spawnChildren(req, 1);
    await drive(() => [req, kid]);
    await runInDurableObject(sessionStub(req), (_obj, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE messages SET is_tool = 0 WHERE role = 'user'");
      sql.exec("UPDATE message_heads SET is_tool = 0 WHERE seq IN (SELECT seq FROM messages WHERE role = 'user')");
      // Back to just before the step that marks them (test/helpers/schema-rewind.ts).
      rewindSchemaBefore(sql, "kind = 'subagent_completion'");
    });
    const shown = async () =>
      JSON.stringify((await invoke("sessions_history", { sessionKey: req, limit: 50 }, { sessionKey: req })).details);
    expect(await shown()).toContain("Internal task completion event");
    await runInDurableObject(sessionStub(req), (_obj, state) => migrate(state.storage.sql));
    expect(await shown()).not.toContain("Internal task completion event");
  });
});

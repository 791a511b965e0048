import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { subagentLifecycleExtension } from "../../src/spawn/subagent-lifecycle";
import { advance, call, enc, invoke, sendAndWait } from "../helpers/http";
import { childState, installFakes, requesterKey, settle, subagentConfig } from "../helpers/subagents";

/**
 * No message is accepted and then lost (src/session/closing.ts): while a session is being deleted or
 * archived, a message (REST, sessions_send) or a PATCH is refused with a 409 — never a 202 whose run
 * is wiped with the storage a moment later.
 */

/**
 * Holds a chosen session's delete inside its beforeDelete step, where the real one awaits other objects:
 * after the last extension's own beforeDelete (the sub-agent lifecycle's) has run.
 */
let gate: { key: string; entered: () => void; wait: Promise<void> } | null = null;
function installGate() {
  const own = subagentLifecycleExtension.beforeDelete!;
  vi.spyOn(subagentLifecycleExtension, "beforeDelete").mockImplementation(async (host) => {
    await own(host);
    if (gate && host.key === gate.key) {
      gate.entered();
      await gate.wait;
    }
  });
}

function holdDelete(key: string) {
  let entered!: () => void;
  let release!: () => void;
  let fail!: (e: Error) => void;
  const inside = new Promise<void>((r) => (entered = r));
  const wait = new Promise<void>((res, rej) => {
    release = res;
    fail = rej;
  });
  gate = { key, entered, wait };
  return { inside, release, fail };
}

beforeEach(() => {
  setConfigOverride(null);
  installGate();
});
afterEach(() => {
  gate = null;
});

const uniq = (p: string) => `${p}-${crypto.randomUUID().slice(0, 8)}`;

describe("delete racing an inbound message", () => {
  it("a message, a sessions_send and a PATCH during DELETE are refused with 409; after it, the key starts afresh", async () => {
    const key = `agent:main:${uniq("deleting")}`;
    expect((await sendAndWait(key, "first")).status).toBe("ok");
    const hold = holdDelete(key);
    const deleting = call("DELETE", `/v1/sessions/${enc(key)}`);
    await hold.inside;

    const msg = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "during delete" });
    expect(msg.status).toBe(409);
    expect(msg.json).toEqual({
      ok: false,
      error: {
        type: "conflict",
        message: `Session ${key} is being deleted; nothing was accepted. Send again once it is gone.`,
      },
    });
    const patched = await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "during delete" });
    expect(patched.status).toBe(409);
    const sent = await invoke(
      "sessions_send",
      { sessionKey: key, message: "during delete", timeoutSeconds: 0 },
      { sessionKey: key },
    );
    expect(sent.status).toBe(200);
    expect(sent.details).toMatchObject({
      status: "error",
      error: `Session ${key} is being deleted; nothing was accepted. Send again once it is gone.`,
    });

    hold.release();
    expect((await deleting).json).toEqual({ ok: true, deleted: key });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
    // Once gone, the key is open again: a new message starts a new session and runs.
    const again = await sendAndWait(key, "after delete");
    expect(again.status).toBe("ok");
    const history = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json;
    expect(history.messages.filter((m: any) => m.role === "user").map((m: any) => m.content[0].text)).toEqual([
      "after delete",
    ]);
  });
});

describe("archive racing an inbound message", () => {
  async function keptChild() {
    setConfigOverride(subagentConfig());
    installFakes((c) => (c.step === "task" ? "result" : c.step === "announce" ? "notes" : "follow-up reply"));
    const req = requesterKey("close-race");
    const r = await invoke("sessions_spawn", { task: "archive me" }, { sessionKey: req });
    expect(r.details.status).toBe("accepted");
    const child: string = r.details.childSessionKey;
    await settle(child);
    return child;
  }

  it("a message posted while the child is being archived is refused (409); the archive completes", async () => {
    const child = await keptChild();
    const hold = holdDelete(child);
    const archiving = advance(child, 60 * 60_000);
    await hold.inside;
    const msg = await call("POST", `/v1/sessions/${enc(child)}/messages`, { message: "still there?" });
    expect(msg.status).toBe(409);
    expect(msg.json.error).toEqual({
      type: "conflict",
      message: `Session ${child} is being archived; nothing was accepted. Send again once it is gone.`,
    });
    hold.release();
    await archiving;
    expect((await childState(child)).exists).toBe(false);
  });

  it("an archive that fails reopens the session: a message then is accepted and runs", async () => {
    const child = await keptChild();
    const hold = holdDelete(child);
    const archiving = advance(child, 60 * 60_000);
    await hold.inside;
    expect((await call("POST", `/v1/sessions/${enc(child)}/messages`, { message: "refused" })).status).toBe(409);
    hold.fail(new Error("registry unavailable"));
    await archiving;
    gate = null;
    const run = await sendAndWait(child, "accepted now");
    expect(run).toMatchObject({ status: "ok", reply: "follow-up reply" });
    expect((await childState(child)).exists).toBe(true);
  });
});

import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call } from "../helpers/http";

const agents = { defaults: { model: "builtin/echo" }, list: [{ id: "main", default: true }, { id: "research" }] };

async function postDm(key: string, extra: Record<string, unknown> = {}) {
  const r = await call("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, {
    message: "hi",
    channel: "Telegram",
    to: "Alice",
    chatType: "direct",
    ...extra,
  });
  return r;
}

describe("session.dmScope: where a DM posted to the main session runs", () => {
  it.each([
    ["main", "agent:main:main"],
    ["per-peer", "agent:main:direct:alice"],
    ["per-channel-peer", "agent:main:telegram:direct:alice"],
    ["per-account-channel-peer", "agent:main:telegram:acct-1:direct:alice"],
  ])("%s → %s", async (dmScope, expected) => {
    setConfigOverride({ session: { dmScope }, agents });
    const r = await postDm("main", { accountId: "acct-1" });
    expect(r.status).toBe(202);
    expect(r.json.sessionKey).toBe(expected);
    const run = await call("GET", `/v1/runs/${r.json.runId}/wait?timeoutMs=5000`);
    expect(run.json).toMatchObject({ sessionKey: expected, status: "ok" });
  });

  it("per-account-channel-peer without an accountId uses the default account; another agent's main keeps its agent", async () => {
    setConfigOverride({ session: { dmScope: "per-account-channel-peer" }, agents });
    expect((await postDm("main")).json.sessionKey).toBe("agent:main:telegram:default:direct:alice");
    expect((await postDm("agent:research:main")).json.sessionKey).toBe("agent:research:telegram:default:direct:alice");
  });

  it("only DMs to a main session move: groups, named keys, messages without a peer, and global scope keep their target", async () => {
    setConfigOverride({ session: { dmScope: "per-channel-peer" }, agents });
    expect((await postDm("main", { chatType: "group" })).json.sessionKey).toBe("agent:main:main");
    expect((await postDm("main", { to: undefined })).json.sessionKey).toBe("agent:main:main");
    expect((await postDm("agent:main:support")).json.sessionKey).toBe("agent:main:support");
    setConfigOverride({ session: { dmScope: "per-channel-peer", scope: "global" }, agents });
    expect((await postDm("main")).json.sessionKey).toBe("main");
  });

  it("a peer that cannot be part of a key is a 400 naming `to`", async () => {
    setConfigOverride({ session: { dmScope: "per-peer" }, agents });
    const r = await postDm("main", { to: "alice smith/../x" });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^to: not usable as a DM peer under session.dmScope "per-peer"/);
  });
});

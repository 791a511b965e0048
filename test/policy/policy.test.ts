import { describe, expect, it } from "vitest";
import { SwitchboardError } from "../../src/errors";
import {
  parseSendCommand,
  parseSendPolicyPatch,
  resolveSendPolicy,
  type SendPolicyConfig,
} from "../../src/policy/send-policy";
import {
  checkSessionAccess,
  type GuardAction,
  isAgentToAgentAllowed,
  resolveEffectiveVisibility,
  type Visibility,
} from "../../src/policy/visibility";

describe("resolveSendPolicy", () => {
  const denyDiscordGroups: SendPolicyConfig = {
    rules: [{ action: "deny", match: { channel: "discord", chatType: "group" } }],
  };

  it("defaults to allow with no policy, an empty policy, or no matching rule", () => {
    expect(resolveSendPolicy({ sessionKey: "agent:main:main" })).toBe("allow");
    expect(resolveSendPolicy({ policy: {}, sessionKey: "agent:main:main" })).toBe("allow");
    expect(resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "agent:main:main" })).toBe("allow");
  });

  it("uses the configured default when no rule matches", () => {
    expect(resolveSendPolicy({ policy: { default: "deny" }, sessionKey: "agent:main:main" })).toBe("deny");
  });

  it("lets the per-session override win outright; null falls through", () => {
    expect(resolveSendPolicy({ policy: { default: "deny" }, override: "allow", sessionKey: "agent:main:main" })).toBe(
      "allow",
    );
    expect(resolveSendPolicy({ override: "deny", sessionKey: "agent:main:main" })).toBe("deny");
    expect(resolveSendPolicy({ policy: { default: "deny" }, override: null, sessionKey: "agent:main:main" })).toBe(
      "deny",
    );
    expect(resolveSendPolicy({ override: "DENY" as any, sessionKey: "agent:main:main" })).toBe("deny");
  });

  it("denies by channel + chatType derived from the key", () => {
    expect(resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "agent:main:discord:group:dev" })).toBe("deny");
    expect(resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "agent:main:discord:direct:bob" })).toBe("allow");
    expect(resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "agent:main:slack:group:dev" })).toBe("allow");
    // Un-prefixed legacy form.
    expect(resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "discord:group:dev" })).toBe("deny");
  });

  it("prefers explicit channel/chatType facts over the key", () => {
    expect(
      resolveSendPolicy({
        policy: denyDiscordGroups,
        sessionKey: "agent:main:main",
        channel: "Discord",
        chatType: "GROUP",
      }),
    ).toBe("deny");
    expect(
      resolveSendPolicy({ policy: denyDiscordGroups, sessionKey: "agent:main:discord:group:dev", channel: "slack" }),
    ).toBe("allow");
  });

  it("normalizes the dm chat type and the per-account DM key form", () => {
    const denyTelegramDm: SendPolicyConfig = {
      rules: [{ action: "deny", match: { channel: "telegram", chatType: "direct" } }],
    };
    expect(resolveSendPolicy({ policy: denyTelegramDm, sessionKey: "agent:main:telegram:acct-1:direct:42" })).toBe(
      "deny",
    );
    expect(resolveSendPolicy({ policy: denyTelegramDm, sessionKey: "x", channel: "telegram", chatType: "dm" })).toBe(
      "deny",
    );
    // `direct:<peer>` (per-peer scope) names no channel, so a channel rule cannot match it.
    expect(resolveSendPolicy({ policy: denyTelegramDm, sessionKey: "agent:main:direct:42" })).toBe("allow");
  });

  it("derives group/channel chat types from WhatsApp and Discord ids", () => {
    const denyGroups: SendPolicyConfig = { rules: [{ action: "deny", match: { chatType: "group" } }] };
    const denyChannels: SendPolicyConfig = { rules: [{ action: "deny", match: { chatType: "channel" } }] };
    expect(resolveSendPolicy({ policy: denyGroups, sessionKey: "agent:main:whatsapp:12345-678@g.us" })).toBe("deny");
    expect(resolveSendPolicy({ policy: denyChannels, sessionKey: "agent:main:discord:guild-1:channel-2" })).toBe(
      "deny",
    );
    expect(resolveSendPolicy({ policy: denyGroups, sessionKey: "agent:main:main" })).toBe("allow");
  });

  it('keyPrefix "cron:" denies cron:job-1 and agent:main:cron:job-1, not other keys', () => {
    const policy: SendPolicyConfig = { rules: [{ action: "deny", match: { keyPrefix: "cron:" } }] };
    expect(resolveSendPolicy({ policy, sessionKey: "cron:job-1" })).toBe("deny");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:cron:job-1" })).toBe("deny");
    expect(resolveSendPolicy({ policy, sessionKey: "Agent:Main:CRON:Job-1" })).toBe("deny");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:main" })).toBe("allow");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:cron:main" })).toBe("allow");
  });

  it("rawKeyPrefix matches only the full key (its channel only)", () => {
    const policy: SendPolicyConfig = { rules: [{ action: "deny", match: { rawKeyPrefix: "agent:main:discord:" } }] };
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:discord:group:dev" })).toBe("deny");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:slack:group:dev" })).toBe("allow");
    expect(resolveSendPolicy({ policy, sessionKey: "discord:group:dev" })).toBe("allow");
    const rawCron: SendPolicyConfig = { rules: [{ action: "deny", match: { rawKeyPrefix: "cron:" } }] };
    expect(resolveSendPolicy({ policy: rawCron, sessionKey: "cron:job-1" })).toBe("deny");
    expect(resolveSendPolicy({ policy: rawCron, sessionKey: "agent:main:cron:job-1" })).toBe("allow");
  });

  it("requires every present matcher to hold", () => {
    const policy: SendPolicyConfig = { rules: [{ action: "deny", match: { channel: "discord", keyPrefix: "cron:" } }] };
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:discord:group:dev" })).toBe("allow");
    expect(resolveSendPolicy({ policy, sessionKey: "cron:job-1" })).toBe("allow");
    expect(resolveSendPolicy({ policy, sessionKey: "cron:job-1", channel: "discord" })).toBe("deny");
  });

  it("lets a later deny beat an earlier allow, and a matched allow beat a deny default", () => {
    const policy: SendPolicyConfig = {
      default: "deny",
      rules: [
        { action: "allow", match: { channel: "discord" } },
        { action: "deny", match: { chatType: "group" } },
      ],
    };
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:discord:group:dev" })).toBe("deny");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:discord:direct:bob" })).toBe("allow");
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:slack:direct:bob" })).toBe("deny");
  });

  it("treats a rule without match as matching everything, and an unknown action as allow", () => {
    expect(resolveSendPolicy({ policy: { rules: [{ action: "deny" }] }, sessionKey: "agent:main:main" })).toBe("deny");
    const policy = { default: "deny", rules: [{ action: "maybe" }] } as unknown as SendPolicyConfig;
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:main" })).toBe("allow");
  });

  it("does not confuse key segments with Object.prototype members", () => {
    const policy: SendPolicyConfig = { rules: [{ action: "deny", match: { channel: "x" } }] };
    expect(resolveSendPolicy({ policy, sessionKey: "agent:main:x:constructor:1" })).toBe("allow");
  });
});

describe("parseSendCommand", () => {
  it.each([
    ["/send on", "allow", "⚙️ Send policy set to on."],
    ["/send allow", "allow", "⚙️ Send policy set to on."],
    ["/send off", "deny", "⚙️ Send policy set to off."],
    ["/send deny", "deny", "⚙️ Send policy set to off."],
    ["/send inherit", null, "⚙️ Send policy set to inherit."],
    ["/send default", null, "⚙️ Send policy set to inherit."],
    ["/send reset", null, "⚙️ Send policy set to inherit."],
    ["  /SEND  Off  ", "deny", "⚙️ Send policy set to off."],
  ])("%s", (text, value, reply) => {
    expect(parseSendCommand(text)).toEqual({ value, reply });
  });

  it.each(["/send", "/send   ", "/send maybe", "/send on now", "/send constructor"])("usage for %j", (text) => {
    const r = parseSendCommand(text);
    expect(r).toEqual({ reply: "⚙️ Usage: /send on|off|inherit" });
    expect(r).not.toHaveProperty("value");
  });

  it.each(["hello", "/sender on", "please /send off", "/status", ""])("not a /send command: %j", (text) => {
    expect(parseSendCommand(text)).toBeNull();
  });
});

describe("parseSendPolicyPatch", () => {
  it("accepts allow/deny in any case and null", () => {
    expect(parseSendPolicyPatch("allow")).toBe("allow");
    expect(parseSendPolicyPatch("DENY")).toBe("deny");
    expect(parseSendPolicyPatch(null)).toBeNull();
  });

  it.each([["maybe"], [undefined], [1], [""], [true], [{}]])("rejects %j", (value) => {
    let err: unknown;
    try {
      parseSendPolicyPatch(value);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).type).toBe("invalid_request");
    expect((err as SwitchboardError).message).toBe('invalid sendPolicy (use "allow"|"deny")');
  });
});

describe("isAgentToAgentAllowed", () => {
  it('glob allow ["ops-*","main"]: ops-a→ops-b ✓, main→ops-a ✓, guest→ops-a ✗', () => {
    const policy = { enabled: true, allow: ["ops-*", "main"] };
    expect(isAgentToAgentAllowed(policy, "ops-a", "ops-b")).toBe(true);
    expect(isAgentToAgentAllowed(policy, "main", "ops-a")).toBe(true);
    expect(isAgentToAgentAllowed(policy, "guest", "ops-a")).toBe(false);
    expect(isAgentToAgentAllowed(policy, "ops-a", "guest")).toBe(false);
    expect(isAgentToAgentAllowed(policy, "OPS-A", "Main")).toBe(true);
  });

  it("always allows the same agent, even when disabled", () => {
    expect(isAgentToAgentAllowed(undefined, "main", "main")).toBe(true);
    expect(isAgentToAgentAllowed({ enabled: false, allow: ["x"] }, "Main", "main")).toBe(true);
  });

  it("requires enabled to be exactly true", () => {
    expect(isAgentToAgentAllowed(undefined, "a", "b")).toBe(false);
    expect(isAgentToAgentAllowed({}, "a", "b")).toBe(false);
    expect(isAgentToAgentAllowed({ enabled: false }, "a", "b")).toBe(false);
    expect(isAgentToAgentAllowed({ enabled: "true" as any }, "a", "b")).toBe(false);
    expect(isAgentToAgentAllowed({ enabled: true }, "a", "b")).toBe(true);
    expect(isAgentToAgentAllowed({ enabled: true, allow: [] }, "a", "b")).toBe(true);
  });

  it("matches exact ids case-insensitively, * as anything, and a blank entry as nothing", () => {
    expect(isAgentToAgentAllowed({ enabled: true, allow: ["A", "B"] }, "a", "b")).toBe(true);
    expect(isAgentToAgentAllowed({ enabled: true, allow: ["a"] }, "a", "b")).toBe(false);
    expect(isAgentToAgentAllowed({ enabled: true, allow: ["*"] }, "a", "b")).toBe(true);
    expect(isAgentToAgentAllowed({ enabled: true, allow: [""] }, "a", "b")).toBe(false);
    // Regex metacharacters in a glob are literal.
    expect(isAgentToAgentAllowed({ enabled: true, allow: ["a.*"] }, "a.x", "ab")).toBe(false);
    expect(isAgentToAgentAllowed({ enabled: true, allow: ["a.*"] }, "a.x", "a.y")).toBe(true);
  });
});

describe("resolveEffectiveVisibility", () => {
  const base = { sandboxed: false, requesterIsSubagent: false };

  it("falls back to tree for invalid or missing values and is case-insensitive", () => {
    expect(resolveEffectiveVisibility({ ...base })).toEqual({ visibility: "tree", restrictToSpawned: false });
    expect(resolveEffectiveVisibility({ ...base, configured: "bogus" }).visibility).toBe("tree");
    expect(resolveEffectiveVisibility({ ...base, configured: "ALL" }).visibility).toBe("all");
    expect(resolveEffectiveVisibility({ ...base, configured: " Agent " }).visibility).toBe("agent");
    expect(resolveEffectiveVisibility({ ...base, configured: "self" }).visibility).toBe("self");
  });

  it("clamps a sandboxed caller to tree with the default spawned clamp, and restricts it", () => {
    expect(resolveEffectiveVisibility({ configured: "all", sandboxed: true, requesterIsSubagent: false })).toEqual({
      visibility: "tree",
      restrictToSpawned: true,
    });
    // The clamp widens self to tree, as in OpenClaw.
    expect(
      resolveEffectiveVisibility({
        configured: "self",
        sandboxed: true,
        sandboxClamp: "spawned",
        requesterIsSubagent: false,
      }).visibility,
    ).toBe("tree");
  });

  it("keeps the configured mode with clamp all", () => {
    expect(
      resolveEffectiveVisibility({
        configured: "all",
        sandboxed: true,
        sandboxClamp: "all",
        requesterIsSubagent: false,
      }),
    ).toEqual({
      visibility: "all",
      restrictToSpawned: false,
    });
  });

  it("never restricts sub-agent requesters to spawned sessions", () => {
    expect(resolveEffectiveVisibility({ configured: "all", sandboxed: true, requesterIsSubagent: true })).toEqual({
      visibility: "tree",
      restrictToSpawned: false,
    });
  });
});

describe("checkSessionAccess", () => {
  const requesterKey = "agent:main:main";
  const same = (
    visibility: Visibility,
    targetKey: string,
    targetSpawnedBy?: string | null,
    action: GuardAction = "history",
  ) =>
    checkSessionAccess({
      action,
      requesterKey,
      requesterAgentId: "main",
      targetKey,
      targetAgentId: "main",
      targetSpawnedBy,
      visibility,
    });
  const cross = (visibility: Visibility, action: GuardAction, a2a?: { enabled?: boolean; allow?: string[] }) =>
    checkSessionAccess({
      action,
      requesterKey,
      requesterAgentId: "main",
      targetKey: "agent:ops:main",
      targetAgentId: "ops",
      visibility,
      a2a,
    });

  it("self: own key allowed, another key forbidden with the exact text per action", () => {
    expect(same("self", requesterKey)).toEqual({ ok: true });
    const labels: Record<GuardAction, string> = {
      history: "Session history",
      send: "Session send",
      status: "Session status",
      list: "Session list",
      search: "Session search",
    };
    for (const action of ["history", "send", "status", "list", "search"] as GuardAction[]) {
      expect(same("self", "agent:main:telegram:group:1", null, action)).toEqual({
        ok: false,
        error: `${labels[action]} visibility is restricted to the current session (tools.sessions.visibility=self).`,
      });
    }
    // self does not open children either.
    expect(same("self", "agent:main:subagent:child-1", requesterKey).ok).toBe(false);
  });

  it("tree: own key and direct children allowed; others and grandchildren forbidden", () => {
    expect(same("tree", requesterKey)).toEqual({ ok: true });
    expect(same("tree", "agent:main:subagent:child-1", requesterKey)).toEqual({ ok: true });
    expect(same("tree", "agent:main:discord:direct:someone-else")).toEqual({
      ok: false,
      error: "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    expect(same("tree", "agent:main:subagent:grandchild", "agent:main:subagent:child-1").ok).toBe(false);
    expect(same("tree", "agent:main:subagent:x", null, "send")).toEqual({
      ok: false,
      error: "Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    expect(same("tree", "agent:main:x", undefined, "list")).toEqual({
      ok: false,
      error: "Session list visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
    expect(same("tree", "agent:main:x", undefined, "status")).toEqual({
      ok: false,
      error: "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
    });
  });

  it("tree: an unknown (empty) spawnedBy never matches an empty requester key", () => {
    const r = checkSessionAccess({
      action: "history",
      requesterKey: "",
      requesterAgentId: "main",
      targetKey: "agent:main:x",
      targetAgentId: "main",
      targetSpawnedBy: "",
      visibility: "tree",
    });
    expect(r.ok).toBe(false);
  });

  it("agent and all allow any same-agent session", () => {
    expect(same("agent", "agent:main:discord:direct:someone-else")).toEqual({ ok: true });
    expect(same("all", "agent:main:discord:direct:someone-else")).toEqual({ ok: true });
  });

  it("cross-agent below all is forbidden with the visibility text per action, whatever a2a says", () => {
    const a2a = { enabled: true, allow: ["*"] };
    // The classic tools keep the classic sentence; session_status and sessions_search (OpenClaw 2026 tools)
    // add its pointer to tools.agentToAgent.
    const classic = (label: string) =>
      `Session ${label} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.`;
    const of2026 = (label: string) =>
      `Session ${label} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.`;
    const expected: Record<GuardAction, string> = {
      history: classic("history"),
      send: classic("send"),
      list: classic("list"),
      status: of2026("status"),
      search: of2026("search"),
    };
    for (const visibility of ["self", "tree", "agent"] as Visibility[]) {
      for (const action of Object.keys(expected) as GuardAction[]) {
        expect(cross(visibility, action, a2a)).toEqual({ ok: false, error: expected[action] });
      }
    }
  });

  it("sandboxed + spawned clamp forbids cross-agent even with a2a allow [*]", () => {
    const { visibility } = resolveEffectiveVisibility({
      configured: "all",
      sandboxed: true,
      requesterIsSubagent: false,
    });
    expect(cross(visibility, "history", { enabled: true, allow: ["*"] })).toEqual({
      ok: false,
      error: "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
    });
  });

  it("cross-agent under all with a2a disabled: exact text per action", () => {
    const expected: Record<GuardAction, string> = {
      history: "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
      send: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
      status: "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
      list: "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility.",
      search: "Agent-to-agent search is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
    };
    for (const action of Object.keys(expected) as GuardAction[]) {
      expect(cross("all", action)).toEqual({ ok: false, error: expected[action] });
      expect(cross("all", action, { enabled: false, allow: ["*"] })).toEqual({ ok: false, error: expected[action] });
    }
  });

  it("cross-agent under all with a2a not allowing the pair: exact text per action", () => {
    const expected: Record<GuardAction, string> = {
      history: "Agent-to-agent history denied by tools.agentToAgent.allow.",
      send: "Agent-to-agent messaging denied by tools.agentToAgent.allow.",
      status: "Agent-to-agent status denied by tools.agentToAgent.allow.",
      list: "Agent-to-agent listing denied by tools.agentToAgent.allow.",
      search: "Agent-to-agent search denied by tools.agentToAgent.allow.",
    };
    for (const action of Object.keys(expected) as GuardAction[]) {
      expect(cross("all", action, { enabled: true, allow: ["main"] })).toEqual({ ok: false, error: expected[action] });
    }
  });

  it("cross-agent under all with a2a allowing the pair is allowed (no tree check across agents)", () => {
    expect(cross("all", "send", { enabled: true, allow: ["main", "ops"] })).toEqual({ ok: true });
    expect(cross("all", "history", { enabled: true })).toEqual({ ok: true });
  });
});

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig, setConfigOverride } from "../src/config/load";
import type { Config } from "../src/config/schema";
import {
  deriveChannel,
  displayKey,
  keyContextOf,
  looksLikeSessionKey,
  parseSessionKey,
  SESSION_ID_RE,
  SESSION_KEY_PATTERN,
} from "../src/keys";
import { call, enc, flushIndex, invoke, sendAndWait } from "./helpers/http";

const cfgOf = (raw: unknown) => parseConfig(raw) as Config;
const perSender = cfgOf({ agents: { list: [{ id: "main", default: true }, { id: "ops" }] } });
const globalScope = cfgOf({
  session: { scope: "global", mainKey: " Primary " },
  agents: { list: [{ id: "main", default: true }, { id: "ops" }] },
});
const parse = (raw: string, cfg: Config = perSender, agent?: string, callerKey?: string) =>
  parseSessionKey(raw, keyContextOf(cfg, agent, callerKey));
const errorOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return { status: (e as { status?: number }).status, message: (e as Error).message };
  }
  throw new Error("expected a 400");
};

describe("parseSessionKey: every key form", () => {
  it.each([
    ["agent:main:main", { canonicalKey: "agent:main:main", agentId: "main", rest: "main", kind: "main" }],
    ["AGENT:Ops:Main", { canonicalKey: "agent:ops:main", agentId: "ops", rest: "main", kind: "main" }],
    [
      "agent:ops:discord:group:dev",
      { canonicalKey: "agent:ops:discord:group:dev", kind: "group", channel: "discord", chatType: "group" },
    ],
    ["agent:ops:slack:channel:c123", { kind: "group", channel: "slack", chatType: "channel" }],
    ["agent:ops:telegram:direct:42", { kind: "other", channel: "telegram", chatType: "direct" }],
    ["agent:ops:direct:peer-1", { kind: "other", chatType: "direct" }],
    ["agent:ops:whatsapp:acct-1:direct:+15550001", { kind: "other", channel: "whatsapp", chatType: "direct" }],
    ["agent:ops:subagent:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e", { kind: "other", isSubagent: true }],
    ["agent:ops:cron:nightly", { canonicalKey: "agent:ops:cron:nightly", kind: "cron", isCronRun: false }],
    ["agent:ops:cron:nightly:run:r1", { kind: "cron", isCronRun: true }],
    ["agent:ops:hook:abc", { kind: "hook" }],
    ["agent:ops:node-mac", { kind: "node" }],
    ["agent:ops:discord:channel:c1:thread:t-9", { kind: "group", threadId: "t-9" }],
    ["agent:ops:telegram:group:-100123:topic:99", { kind: "group", channel: "telegram", threadId: "99" }],
    // Un-prefixed keys belong to the default agent.
    ["cron:daily-report", { canonicalKey: "agent:main:cron:daily-report", agentId: "main", kind: "cron" }],
    [
      "hook:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e",
      { canonicalKey: "agent:main:hook:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e", kind: "hook" },
    ],
    ["node-macbook", { canonicalKey: "agent:main:node-macbook", kind: "node" }],
    ["node:macbook", { canonicalKey: "agent:main:node:macbook", kind: "node" }],
    ["telegram:group:123", { canonicalKey: "agent:main:telegram:group:123", kind: "group", channel: "telegram" }],
    ["sess-group", { canonicalKey: "agent:main:sess-group", kind: "other" }],
  ])("%s", (raw, expected) => {
    expect(parse(raw)).toMatchObject(expected);
  });

  it("classifies kind on the part after agent:<id>: (OpenClaw's `other` quirk is not copied)", () => {
    expect(parse("agent:x:main").kind).toBe("main");
    expect(parse("agent:x:cron:j").kind).toBe("cron");
  });
});

describe("aliases", () => {
  it("per-sender: main → the caller agent's main key; current → the caller's own key", () => {
    expect(parse("main").canonicalKey).toBe("agent:main:main");
    expect(parse("main", perSender, "ops").canonicalKey).toBe("agent:ops:main");
    expect(parse("MAIN", perSender, "ops").canonicalKey).toBe("agent:ops:main");
    expect(parse("current", perSender, "ops", "agent:ops:discord:group:dev").canonicalKey).toBe(
      "agent:ops:discord:group:dev",
    );
    // Without a requester, `current` is the caller's main.
    expect(parse("current", perSender, "ops").canonicalKey).toBe("agent:ops:main");
  });

  it("per-sender: `global` is reserved (400)", () => {
    expect(errorOf(() => parse("global"))).toEqual({
      status: 400,
      message: expect.stringContaining('"global" is a reserved session key'),
    });
  });

  it('global scope: mainKey " Primary " → primary, alias global; main/primary/global all reach `global`, shown as main', () => {
    expect(globalScope.session.mainKey).toBe("primary");
    for (const raw of ["main", "primary", "global", "GLOBAL"]) {
      const p = parse(raw, globalScope, "ops");
      expect(p.canonicalKey).toBe("global");
      expect(p.kind).toBe("main");
    }
    expect(displayKey("global")).toBe("main");
    expect(displayKey("agent:ops:main")).toBe("agent:ops:main");
    // `agent:<id>:main` is that agent's main key, whatever mainKey is called.
    expect(parse("agent:ops:main", globalScope).canonicalKey).toBe("agent:ops:primary");
    expect(parse("agent:ops:primary", globalScope).kind).toBe("main");
    expect(parse("current", globalScope, "main", "global").canonicalKey).toBe("global");
  });
});

describe("looksLikeSessionKey and sessionIds", () => {
  it.each([
    "main",
    "current",
    "global",
    "unknown",
    "agent:main:main",
    "cron:daily-report",
    "node:macbook",
    "node-mac",
    "hook:x",
    "telegram:group:123",
  ])("%s looks like a key", (k) => expect(looksLikeSessionKey(k)).toBe(true));
  it("random-slug and a UUID do not (they are resolved through the registry)", () => {
    expect(looksLikeSessionKey("random-slug")).toBe(false);
    expect(looksLikeSessionKey("0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e")).toBe(false);
    expect(SESSION_ID_RE.test("0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e")).toBe(true);
  });
});

describe("malformed, reserved and too-long keys are a 400", () => {
  it.each([
    ["agent::main", "empty segment"],
    ["agent:main", "expected agent:<agentId>:<rest>"],
    ["agent:main:has space", "invalid character"],
    ["agent:main:a/b", "invalid character"],
    ["agent:-bad:main", "invalid agent id"],
    ["unknown", '"unknown" is a reserved session key'],
    ["agent:main:unknown", '"unknown" is a reserved session key'],
    ["agent:main:global", '"global" is a reserved session key'],
    ["", "sessionKey required"],
    ["a".repeat(513), "too long (max 512 characters)"],
  ])("%j", (raw, message) => {
    expect(errorOf(() => parse(raw))).toEqual({ status: 400, message: expect.stringContaining(message) });
  });

  it("512 characters is still a key", () => {
    expect(parse(`agent:main:${"x".repeat(501)}`).canonicalKey.length).toBe(512);
  });
});

describe("channel derivation (spec Channel Field)", () => {
  const ch = (raw: string, recorded: { channel?: string; lastChannel?: string } = {}) =>
    deriveChannel(parse(raw), recorded);
  it("groups: the recorded channel, else the key's", () => {
    expect(ch("agent:main:group:g1", { channel: "signal", lastChannel: "webchat" })).toBe("signal");
    expect(ch("agent:main:discord:group:g1")).toBe("discord");
  });
  it("direct and main: lastChannel", () => {
    expect(ch("agent:main:direct:bob", { lastChannel: "imessage" })).toBe("imessage");
    expect(ch("main", { lastChannel: "telegram" })).toBe("telegram");
  });
  it("cron/hook/node: internal; otherwise unknown", () => {
    expect(ch("cron:j", { lastChannel: "discord" })).toBe("internal");
    expect(ch("hook:h")).toBe("internal");
    expect(ch("node-n")).toBe("internal");
    expect(ch("main")).toBe("unknown");
  });
});

describe("keys over HTTP", () => {
  it("rows carry canonical keys and kinds classified on the rest; aliases reach the same object", async () => {
    await sendAndWait("main", "hi from alias");
    await sendAndWait("cron:keys-job", "tick");
    await sendAndWait("agent:main:discord:group:keys-dev", "hello group", { channel: "discord", to: "channel:1" });
    await sendAndWait("agent:main:signal:direct:keys-bob", "hello dm", { channel: "signal", to: "bob" });
    await sendAndWait("hook:keys-hook", "hooked");
    await sendAndWait("node-keys", "node says");

    const main = await call("GET", `/v1/sessions/${enc("agent:main:main")}`);
    expect(main.json).toMatchObject({ key: "agent:main:main", kind: "main", channel: "unknown" });
    const viaAlias = await call("GET", `/v1/sessions/main/history`);
    expect(viaAlias.json.sessionKey).toBe("agent:main:main");
    expect(viaAlias.json.messages.some((m: any) => m.content[0].text === "hi from alias")).toBe(true);

    const rows = (await call("GET", "/v1/sessions?limit=100")).json.sessions as any[];
    const byKey = Object.fromEntries(rows.map((r) => [r.key, r]));
    expect(byKey["agent:main:cron:keys-job"]).toMatchObject({ kind: "cron", channel: "internal" });
    expect(byKey["agent:main:discord:group:keys-dev"]).toMatchObject({ kind: "group", channel: "discord" });
    expect(byKey["agent:main:signal:direct:keys-bob"]).toMatchObject({
      kind: "other",
      channel: "signal",
      lastChannel: "signal",
      lastTo: "bob",
    });
    expect(byKey["agent:main:hook:keys-hook"]).toMatchObject({ kind: "hook", channel: "internal" });
    expect(byKey["agent:main:node-keys"]).toMatchObject({ kind: "node", channel: "internal" });
  });

  it("a malformed or reserved key in a path or a tool call is a 400 naming the problem", async () => {
    for (const key of ["agent::x", "unknown", "global", "agent:main:bad key"]) {
      const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "x" });
      expect(r.status, key).toBe(400);
      expect(r.json.ok).toBe(false);
      expect(r.json.error.type).toBe("invalid_request");
    }
    const t = await invoke("sessions_history", { sessionKey: "agent::x" });
    expect(t.status).toBe(400);
    expect(t.body.error.message).toContain("empty segment");
  });

  it("under global scope the DM bucket is `global`, listed and shown as main", async () => {
    setConfigOverride({ session: { scope: "global" }, agents: { list: [{ id: "main", default: true }] } });
    const run = await sendAndWait("main", "global hello");
    expect(run.sessionKey).toBe("main"); // run snapshots never show `global` (test/policy/global-scope.test.ts)
    await flushIndex("global");
    const list = await invoke("sessions_list", {}, { sessionKey: "main" });
    expect(list.details.sessions.map((r: any) => r.key)).toContain("main");
    expect(list.details.sessions.map((r: any) => r.key)).not.toContain("global");
    const hist = await invoke("sessions_history", { sessionKey: "global" });
    expect(hist.details.sessionKey).toBe("main");
    expect(hist.details.messages.map((m: any) => m.content[0].text)).toContain("global hello");
  });
});

describe("SESSION_KEY_PATTERN (the {key} path parameter of /openapi.json)", () => {
  // The pattern and the parser must refuse the same keys: keys built from the grammar's own words, characters
  // and near misses (empty segments, a bad agent id, reserved rests, characters outside a segment, any case).
  const word = fc.constantFrom("agent", "AGENT", "Agent", "main", "unknown", "global", "cron", "x", "ops", "run", "-1");
  const chars = fc.string({ unit: fc.constantFrom(..."aZ09_.@+=!$~,-/#é "), minLength: 1, maxLength: 6 });
  const segment = fc.oneof(word, chars, fc.constant(""), fc.constant("a".repeat(65)));
  const key = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => s.join(":"));
  const parses = (raw: string) => {
    try {
      parseSessionKey(raw, keyContextOf(perSender));
      return true;
    } catch {
      return false;
    }
  };

  it("accepts exactly the keys the parser accepts (blanks around a key aside, which the parser trims)", () => {
    const pattern = new RegExp(SESSION_KEY_PATTERN);
    fc.assert(
      fc.property(key, (raw) => {
        const blankEdged = raw.trim() !== raw;
        // A bare `global` is grammar-valid: only CONFIG (session.scope) decides it (src/keys.ts).
        const global = raw.toLowerCase() === "global";
        expect(pattern.test(raw), raw).toBe(blankEdged ? false : parses(raw) || global);
      }),
      { numRuns: 3000, seed: 25 },
    );
    for (const raw of ["main", "current", "agent:ops:telegram:group:-100", "cron:job:run:1", "AGENT:Main:X"])
      expect(pattern.test(raw), raw).toBe(true);
    for (const raw of ["agent::x", "agent:x", "agent", "unknown", "agent:main:global", "a b", "x:", "ø"])
      expect(pattern.test(raw), raw).toBe(false);
  });
});

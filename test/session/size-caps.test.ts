import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { queueDelivery } from "../../src/channels/outbox";
import { parseConfig, setConfigOverride } from "../../src/config/load";
import { SwitchboardError } from "../../src/errors";
import {
  capText,
  DELIVERY_LIST_BYTES,
  MESSAGE_MAX_BYTES,
  storedTextBytes,
  truncationMarker,
} from "../../src/session/byte-budget";
import { callExtension } from "../../src/session/extensions";
import { freezeResult } from "../../src/spawn/announce-format";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";
import { rpcBytes, seedTranscript as seed } from "../helpers/max-messages";
import { baseConfig, flowsOf, installFakes, type ModelRequest, until } from "../helpers/scripted";

describe("stored sizes", () => {
  const samples = [
    "plain",
    "é ü 中文",
    "😀 pairs 😀",
    'quote " and \\ backslash',
    "lines\n\ttabs\r",
    "\u0000\u0001\u001f controls",
    "lone \ud800 high",
    "lone \udc00 low",
    "\u2028 separators \u2029",
  ];
  it("storedTextBytes is the UTF-8 size of the JSON-encoded string, without its quotes", () => {
    for (const t of samples)
      expect(storedTextBytes(t)).toBe(new TextEncoder().encode(JSON.stringify(t)).byteLength - 2);
  });
  it("a sub-agent's frozen Result is 100 KiB as stored, whatever its characters", () => {
    const controls = "\u0001".repeat(60_000); // 60,000 characters, 360,000 bytes as stored
    const frozen = freezeResult(controls)!;
    expect(frozen.endsWith("\n[truncated: frozen completion output exceeded 100KB (352KB)]")).toBe(true);
    expect(storedTextBytes(frozen.slice(0, frozen.indexOf("\n[truncated")))).toBeLessThanOrEqual(100 * 1024);
    expect(freezeResult("x".repeat(100 * 1024))).toBe("x".repeat(100 * 1024));
  });
  it("capText keeps a fitting text as it is, else cuts it with the marker within the limit and never splits a pair", () => {
    expect(capText("short", 100)).toBe("short");
    for (const t of samples) {
      const long = t.repeat(400);
      for (const max of [64, 100, 1000]) {
        const cut = capText(long, max);
        expect(storedTextBytes(cut)).toBeLessThanOrEqual(max);
        expect(cut.endsWith(truncationMarker(max))).toBe(true);
        expect(long.startsWith(cut.slice(0, cut.length - truncationMarker(max).length))).toBe(true);
        expect(
          /[\ud800-\udbff]$/.test(cut.slice(0, cut.length - truncationMarker(max).length)) && !/lone/.test(t),
        ).toBe(false);
      }
    }
  });
});

describe("inbound size caps", () => {
  it("limits.maxMessageBytes and maxContextBytes take their documented ranges (docs/limits.md)", () => {
    const err = (limits: Record<string, unknown>) => {
      const c = parseConfig({ limits });
      return c instanceof SwitchboardError ? c.message : null;
    };
    expect(err({ maxMessageBytes: 4096, maxContextBytes: 64 * 1024 })).toBeNull();
    expect(err({ maxMessageBytes: MESSAGE_MAX_BYTES + 1 })).toContain("limits.maxMessageBytes");
    expect(err({ maxMessageBytes: 1023 })).toContain("limits.maxMessageBytes");
    expect(err({ maxContextBytes: 1000 })).toContain("limits.maxContextBytes");
    expect(err({ maxContextBytes: Infinity })).toContain("limits.maxContextBytes");
  });

  it("a message over 512 KiB is a 413 naming the field, and nothing is stored", async () => {
    const key = "agent:main:budget-413";
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "a".repeat(MESSAGE_MAX_BYTES + 1) });
    expect(r.status).toBe(413);
    expect(r.json).toEqual({
      ok: false,
      error: {
        type: "payload_too_large",
        message: expect.stringMatching(/^message: 524289 bytes exceeds the limit of 524288 bytes/),
      },
    });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
    // Exactly at the cap is accepted.
    expect(
      (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "a".repeat(MESSAGE_MAX_BYTES) })).status,
    ).toBe(202);
  });

  it("sizes count UTF-8 as stored: multi-byte characters and escaped control characters", async () => {
    setConfigOverride({ limits: { maxMessageBytes: 4096 } });
    const key = "agent:main:budget-utf8";
    // 1,366 × "é" (2 bytes) = 2,732 bytes: fits; 683 × "\u0001" (6 bytes escaped) = 4,098: does not.
    expect((await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "é".repeat(1366) })).status).toBe(202);
    const ctl = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "\u0001".repeat(683) });
    expect(ctl.status).toBe(413);
    expect(ctl.json.error.message).toMatch(/^message: 4098 bytes exceeds the limit of 4096 bytes/);
  });

  it("sessions_send and sessions_spawn refuse over-cap text with a 413 naming message / task; nothing is queued", async () => {
    setConfigOverride({ limits: { maxMessageBytes: 2048 } });
    const target = "agent:main:budget-send-target";
    const send = await invoke(
      "sessions_send",
      { sessionKey: target, message: "m".repeat(2049), timeoutSeconds: 0 },
      { sessionKey: "agent:main:main" },
    );
    expect(send.status).toBe(413);
    expect(send.body.error).toMatchObject({
      type: "payload_too_large",
      message: expect.stringMatching(/^message: 2049 bytes/),
    });
    expect(await sessionStub(target).getMeta()).toBeNull();
    const spawn = await invoke(
      "sessions_spawn",
      { task: "t".repeat(3000) },
      { sessionKey: "agent:main:budget-spawner" },
    );
    expect(spawn.status).toBe(413);
    expect(spawn.body.error.message).toMatch(/^task: 3000 bytes/);
    const children = await invoke("sessions_list", {}, { sessionKey: "agent:main:budget-spawner" });
    expect(children.details.sessions.filter((s: any) => s.spawnedBy === "agent:main:budget-spawner")).toEqual([]);
  });
});

describe("generated text over the cap is kept truncated, never refused", () => {
  it("a model reply over limits.maxMessageBytes: the run is ok, reply and transcript end with the marker", async () => {
    useFakeProvider({ auto: (c) => c.reply("r".repeat(10_000)), extraConfig: { limits: { maxMessageBytes: 4096 } } });
    const key = "agent:main:budget-long-reply";
    const run = await sendAndWait(key, "go");
    expect(run.status).toBe("ok");
    expect(new TextEncoder().encode(run.reply).byteLength).toBeLessThanOrEqual(4096);
    expect(run.reply.endsWith(truncationMarker(4096))).toBe(true);
    const lines = String((await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`)).json)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[2].message.content[0].text).toBe(run.reply);
  });

  it("a tool result over the cap is stored truncated with the marker", async () => {
    const key = "agent:main:budget-tool";
    // Three 4,000-character history texts: about 12 KB of tool result, three times the 4 KiB cap.
    const other = "agent:main:budget-tool-source";
    await seed(other, 3, (i) => ({
      role: "user",
      content: [{ type: "text", text: `${i}`.padEnd(10_000, "h") }],
      timestamp: i,
    }));
    useFakeProvider({
      auto: (c) =>
        (c.body.messages as any[]).some((m) => m.role === "tool")
          ? c.reply("done")
          : c.toolCall("sessions_history", { sessionKey: other }),
      extraConfig: { limits: { maxMessageBytes: 4096 }, tools: { sessions: { visibility: "agent" } } },
    });
    const run = await sendAndWait(key, "list");
    expect(run.status).toBe("ok");
    const h = await sessionStub(key).transcriptChunk(0);
    const tool = h.chunk
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .find((l) => l.message.role === "toolResult");
    expect(tool.message.content[0].text.endsWith(truncationMarker(4096))).toBe(true);
    expect(new TextEncoder().encode(JSON.stringify(tool.message.content[0].text)).byteLength).toBeLessThanOrEqual(
      4096 + 2,
    );
  });
});

describe("delivery listings", () => {
  it("stop at their byte budget inside the object and say so", async () => {
    const key = "agent:main:budget-deliveries";
    await sessionStub(key).ensureSession();
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.storage.transactionSync(() => {
        for (let i = 0; i < 8; i++)
          queueDelivery(obj, {
            kind: "reply",
            route: { channel: "nowhere", to: null },
            message: `${i}`.padEnd(500_000, "d"),
            idempotencyKey: `big-${i}`,
          });
      });
    });
    const raw = await callExtension(sessionStub(key), "outbox", "list", { limit: 500 });
    expect(rpcBytes(raw)).toBeLessThanOrEqual(DELIVERY_LIST_BYTES);
    expect(raw.deliveries.length).toBe(4);
    expect(raw.truncated).toBe(true);
    const r = await call("GET", `/v1/sessions/${enc(key)}/deliveries?limit=500`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ count: 4, truncated: true });
    const small = await call("GET", `/v1/sessions/${enc(key)}/deliveries?limit=2`);
    expect(small.json.truncated).toBeUndefined();
  });
});

describe("a 500 KB sessions_send through 5 ping-pong turns and the announce", () => {
  it("completes, every turn receives the whole text, and no flow row, timer or run row holds more than its cap", async () => {
    const req = "agent:main:discord:group:budget-pp-req";
    const target = "agent:main:discord:group:budget-pp-target";
    setConfigOverride(baseConfig({ session: { agentToAgent: { maxPingPongTurns: 5 } } }));
    const fakes = installFakes((r: ModelRequest) => (r.kind === "announce" ? "announce now" : r.lastUser));
    const message = "p".repeat(500_000);
    const sent = await invoke("sessions_send", { sessionKey: target, message, timeoutSeconds: 0 }, { sessionKey: req });
    expect(sent.details.status).toBe("accepted");
    const flow = await until(async () => {
      const f = (await flowsOf(target))[0];
      expect(f?.step).toBe("done");
      return f;
    }, 60_000);
    expect(flow.outcome).toBe("announced");
    expect(flow.turns.map((t: any) => [t.turn, t.status])).toEqual([
      [1, "ok"],
      [2, "ok"],
      [3, "ok"],
      [4, "ok"],
      [5, "ok"],
    ]);
    await until(async () => expect(fakes.hooks.map((h) => h.body.message)).toEqual(["announce now"]));
    // Primary, five turns alternating requester/target, announce: each turn got the other side's whole reply.
    expect(fakes.model.map((m) => [m.kind, m.session === req ? "req" : "target", m.lastUser.length])).toEqual([
      ["primary", "target", 500_000],
      ["turn", "req", 500_000],
      ["turn", "target", 500_000],
      ["turn", "req", 500_000],
      ["turn", "target", 500_000],
      ["turn", "req", 500_000],
      ["announce", "target", "Agent-to-agent announce step.".length],
    ]);
    expect(fakes.model[6].system).toContain(`Original request: ${"p".repeat(100)}`);
    expect(fakes.model[6].system).toContain(truncationMarker(16 * 1024));
    // Rows in both objects: the flow holds quotes and excerpts, timers hold references, runs one message and one reply.
    for (const key of [req, target]) {
      await runInDurableObject(sessionStub(key), (obj) => {
        const flows =
          obj.sql.exec<{ n: number }>("SELECT MAX(length(CAST(json AS BLOB))) AS n FROM flows").one().n ?? 0;
        const timers =
          obj.sql.exec<{ n: number }>("SELECT MAX(length(CAST(payload AS BLOB))) AS n FROM timers").one().n ?? 0;
        const runs =
          obj.sql
            .exec<{ n: number }>(
              "SELECT MAX(length(CAST(input_json AS BLOB)) + length(CAST(COALESCE(reply, '') AS BLOB))) AS n FROM runs",
            )
            .one().n ?? 0;
        expect(flows).toBeLessThan(600 * 1024);
        expect(timers).toBeLessThan(1024);
        expect(runs).toBeLessThan(1100 * 1024);
      });
    }
  });
});

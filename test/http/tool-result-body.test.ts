import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { toolResult, toolResultBody } from "../../src/http/routes/tools";
import { call } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";
import { baseConfig, installFakes } from "../helpers/scripted";

/** What `c.json` makes of the answer: the body toolResultBody must equal byte for byte. */
const viaJson = (payload: unknown, tool: string) => JSON.stringify({ ok: true, result: toolResult(payload, tool) });

describe("/tools/invoke's answer serialises the payload once (src/http/routes/tools.ts)", () => {
  it("is byte for byte c.json's text: quotes, escapes, non-ASCII, U+2028, undefined fields, nested rows", () => {
    const payloads: unknown[] = [
      {
        count: 2,
        sessions: [
          { key: 'agent:a:"q"\\b', label: "line\nbreak\ttab \u2028 \u0001 é 😀", updatedAt: 1, skipped: undefined },
          { key: "agent:a:x", messages: [{ role: "user", content: [{ type: "text", text: "</script>" }] }] },
        ],
        visibility: "agent",
        nextCursor: undefined,
      },
      { status: "forbidden", error: "no" },
      [],
      "a string payload",
      null,
      undefined,
    ];
    for (const p of payloads) expect(toolResultBody(p, "sessions_list")).toBe(viaJson(p, "sessions_list"));
    // A tool with its own text block: the text is the card, `details` still the payload's JSON.
    const status = { statusText: "🧠 Model: x\nline two", sessionKey: "agent:main:main" };
    expect(toolResultBody(status, "session_status")).toBe(viaJson(status, "session_status"));
    expect(JSON.parse(toolResultBody(status, "session_status")).result.content[0].text).toBe(status.statusText);
  });

  it("a sessions_list answer over HTTP: JSON, its text block the details' JSON", async () => {
    setConfigOverride(baseConfig());
    installFakes(() => "ok");
    const r = await call("POST", "/tools/invoke", { tool: "sessions_list", sessionKey: "agent:main:main", args: {} });
    expect(r.status).toBe(200);
    expect(r.headers.get("Content-Type")).toBe("application/json");
    expect(r.json.ok).toBe(true);
    expect(r.json.result.content).toEqual([{ type: "text", text: JSON.stringify(r.json.result.details) }]);
    expect(r.json.result.details).toMatchObject({ sessions: expect.any(Array), visibility: expect.any(String) });
    await quiesce();
  });
});

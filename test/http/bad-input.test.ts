import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import { authLimiter } from "../../src/http/rate-limit";
import { sessionIndex } from "../../src/registry/session-index";
import { call, enc, invoke, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait, sessionStub } from "../helpers/http";

/**
 * Bad input gets a clear 4xx and changes nothing (docs/limits.md): every case asserts the status, the
 * envelope, and that no session was created and the listing is unchanged.
 */
beforeEach(() => {
  authLimiter.reset();
  setConfigOverride(null);
});

const SEED = "agent:main:bad-seed";

async function snapshot() {
  const list = await call("GET", "/v1/sessions?limit=1000");
  const rows = (list.json.sessions as any[]).map((r) => `${r.key}@${r.updatedAt}`).sort();
  const hist = await call("GET", `/v1/sessions/${enc(SEED)}/history?limit=1000&includeTools=true`);
  return {
    rows,
    seedMessages: hist.json.messages.length,
    registry: await sessionIndex(env, loadConfig(env), "main").count(),
  };
}

async function hasStorage(key: string): Promise<boolean> {
  return runInDurableObject(
    sessionStub(key),
    (_o, s) => s.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 'meta'").toArray().length > 0,
  );
}

function expect4xx(r: { status: number; json: any }, status: number, message?: string | RegExp) {
  expect(r.status).toBe(status);
  expect(r.json.ok).toBe(false);
  expect(typeof r.json.error.type).toBe("string");
  if (typeof message === "string") expect(r.json.error.message).toContain(message);
  else if (message) expect(r.json.error.message).toMatch(message);
}

describe("bad input changes nothing", () => {
  it("wrong types and missing fields in /tools/invoke are 400s naming the field", async () => {
    await sendAndWait(SEED, "seed");
    const before = await snapshot();
    const cases: [unknown, string][] = [
      [{}, "tool"],
      [{ tool: 5 }, "tool"],
      [{ tool: "sessions_list", args: [] }, "args: expected an object"],
      // null is not "no arguments": a client bug is refused, not run as a call without them.
      [{ tool: "agents_list", args: null }, "args: expected an object (omit args, or send {}, for no arguments)"],
      [
        { tool: "sessions_list", sessionKey: "agent::x" },
        'sessionKey: Malformed session key "agent::x": empty segment',
      ],
      [{ tool: "sessions_list", args: { limit: "ten" } }, "limit"],
      [{ tool: "sessions_list", args: { limit: 0 } }, "limit"],
      [{ tool: "sessions_list", args: { kinds: "main" } }, "kinds"],
      [{ tool: "sessions_list", args: { messageLimit: -1 } }, "messageLimit"],
      [{ tool: "sessions_list", args: { activeMinutes: true } }, "activeMinutes"],
      [{ tool: "sessions_list", args: { cursor: "garbage!" } }, "cursor"],
      [{ tool: "sessions_history", args: {} }, "sessionKey required"],
      [{ tool: "sessions_history", args: { sessionKey: "   " } }, "sessionKey required"],
      [{ tool: "sessions_history", args: { sessionKey: 12 } }, "sessionKey"],
      [{ tool: "sessions_history", args: { sessionKey: SEED, includeTools: "yes" } }, "includeTools"],
      [{ tool: "sessions_history", args: { sessionKey: SEED, before: 0 } }, "before"],
      [{ tool: "sessions_list", sessionKey: 42 }, "sessionKey"],
      [{ tool: "sessions_list", dryRun: "no" }, "dryRun"],
    ];
    for (const [body, field] of cases) {
      const r = await call("POST", "/tools/invoke", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json).toEqual({
        ok: false,
        error: { type: "invalid_request", message: expect.stringContaining(field) },
      });
    }
    expect(await snapshot()).toEqual(before);
  });

  it("wrong types on REST are 400s; the message is never recorded", async () => {
    const key = "agent:main:bad-rest";
    for (const body of [
      {},
      { message: "" },
      { message: 5 },
      { message: "x", channel: "has space" },
      { message: "x", deliver: "yes" },
      { message: "x", chatType: "room" },
      { message: "x", threadId: {} },
    ]) {
      const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.type).toBe("invalid_request");
    }
    const q = await call("GET", "/v1/sessions?limit=-3");
    expect4xx(q, 400, "limit");
    expect4xx(await call("GET", "/v1/sessions?activeMinutes=soon"), 400, "activeMinutes");
    expect4xx(await call("GET", "/v1/sessions?cursor=%%%"), 400, "cursor");
    expect4xx(await call("GET", `/v1/runs/${crypto.randomUUID()}.eA/wait?timeoutMs=-1`), 400, "timeoutMs");
    expect(await hasStorage(key)).toBe(false);
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
  });

  it("query strings and the PATCH body are closed: an unknown name is a 400 naming it; the invoke envelope stays open", async () => {
    const key = "agent:main:bad-closed";
    expect4xx(
      await call("GET", "/v1/sessions?limt=5"),
      400,
      "limt: unknown query parameter (this route takes agentId, limit, kinds, activeMinutes, cursor)",
    );
    expect4xx(
      await call("GET", `/v1/sessions/${enc(key)}?verbose=1&x=`),
      400,
      "verbose, x: unknown query parameters (this route takes none)",
    );
    expect4xx(await call("GET", "/healthz?probe=1", undefined, { token: null }), 400, "probe: unknown query parameter");
    expect4xx(
      await call("PATCH", `/v1/sessions/${enc(key)}`, { labl: "x", mdl: "y" }),
      400,
      "labl, mdl: unknown fields",
    );
    expect4xx(await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "  " }), 400, "label: invalid label: empty");
    expect(await hasStorage(key)).toBe(false);
    // OpenClaw clients send envelope fields of their own: ignored, as before (docs/contract.md, "Endpoints").
    const extra = await call("POST", "/tools/invoke", { tool: "agents_list", args: {}, dryRun: true, channel: "x" });
    expect(extra.status).toBe(200);
  });

  it("unknown tools are a 404 (and so are tools hidden from sub-agents)", async () => {
    const before = await snapshot();
    const r = await invoke("sessions_delete_everything", {});
    expect(r.status).toBe(404);
    expect(r.body).toEqual({
      ok: false,
      error: { type: "not_found", message: "Unknown tool: sessions_delete_everything" },
    });
    const sub = await invoke(
      "sessions_list",
      {},
      { sessionKey: "agent:main:subagent:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e" },
    );
    expect(sub.status).toBe(404);
    expect(sub.body.error.message).toBe("Tool not available for this session: sessions_list");
    expect(await hasStorage("agent:main:subagent:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e")).toBe(false);
    expect(await snapshot()).toEqual(before);
  });

  it("huge bodies are a 413 before anything is parsed", async () => {
    const key = "agent:main:bad-huge";
    const huge = "x".repeat(2 * 1024 * 1024 + 10);
    const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: huge });
    expect4xx(r, 413, "exceeds");
    expect(r.json.error.type).toBe("payload_too_large");
    const t = await call("POST", "/tools/invoke", { tool: "sessions_list", args: { pad: huge } });
    expect4xx(t, 413);
    expect(await hasStorage(key)).toBe(false);
  });

  it("malformed JSON and non-object bodies are 400s", async () => {
    const key = "agent:main:bad-json";
    for (const raw of ["{", "not json", "[1,2]", "null", '"str"', ""]) {
      const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, raw);
      expect(r.status, raw).toBe(400);
      expect(r.json.error.message).toMatch(/Request body must be (valid JSON|a JSON object)/);
      const t = await call("POST", "/tools/invoke", raw);
      expect(t.status, raw).toBe(400);
    }
    expect(await hasStorage(key)).toBe(false);
  });

  it("malformed and reserved keys are 400s everywhere and create nothing", async () => {
    const before = await snapshot();
    for (const key of [
      "agent::main",
      "agent:main:a b",
      "unknown",
      "global",
      "agent:main:unknown",
      `agent:main:${"k".repeat(600)}`,
      "agent:BAD*:x",
    ]) {
      expect4xx(await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "x" }), 400);
      expect4xx(await call("GET", `/v1/sessions/${enc(key)}`), 400);
      expect4xx(await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "x" }), 400);
      expect4xx(await call("DELETE", `/v1/sessions/${enc(key)}`), 400);
      expect4xx(await call("GET", `/v1/sessions/${enc(key)}/history`), 400);
      const asRequester = await invoke("sessions_list", {}, { sessionKey: key });
      expect(asRequester.status, key).toBe(400);
      const asTarget = await invoke("sessions_history", { sessionKey: key });
      if (key.startsWith("agent:") || key === "unknown" || key === "global") expect(asTarget.status, key).toBe(400);
    }
    expect(await snapshot()).toEqual(before);
  });

  it("tokens of the wrong agent are 403s and change nothing", async () => {
    await sendAndWait(SEED, "seed 2");
    const before = await snapshot();
    expect4xx(
      await call("POST", `/v1/sessions/${enc(SEED)}/messages`, { message: "hijack" }, { token: RESEARCH_TOKEN }),
      403,
    );
    expect4xx(await call("PATCH", `/v1/sessions/${enc(SEED)}`, { label: "owned" }, { token: RESEARCH_TOKEN }), 403);
    expect4xx(await call("DELETE", `/v1/sessions/${enc(SEED)}`, undefined, { token: RESEARCH_TOKEN }), 403);
    expect4xx(
      await call(
        "POST",
        `/v1/sessions/${enc("agent:main:bad-new")}/messages`,
        { message: "x" },
        { token: RESEARCH_TOKEN },
      ),
      403,
    );
    const r = await invoke("sessions_list", {}, { sessionKey: "agent:main:bad-new", token: RESEARCH_TOKEN });
    expect(r.status).toBe(403);
    // The right token still works, and nothing was created by the refused calls.
    expect(
      (await call("GET", `/v1/sessions/${enc(SEED)}`, undefined, { token: MAIN_TOKEN })).json.label,
    ).toBeUndefined();
    expect(await hasStorage("agent:main:bad-new")).toBe(false);
    expect(await snapshot()).toEqual(before);
  });

  it("a list for an unconfigured agent is a 404, and creates no registry shard", async () => {
    const r = await call("GET", "/v1/sessions?agentId=ghost");
    expect4xx(r, 404, 'Unknown agent "ghost"');
    const size = await runInDurableObject(
      env.REGISTRY.getByName("registry:ghost"),
      (_o, s) => s.storage.sql.exec("SELECT COUNT(*) AS n FROM sessions").one().n,
    );
    expect(size).toBe(0);
  });
});

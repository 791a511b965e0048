import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { loadConfig, setConfigOverride } from "../../src/config/load";
import { sessionIndex } from "../../src/registry/session-index";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, enc, invoke, sendAndWait, sessionStub } from "../helpers/http";

const err = (type: string, message: unknown) => ({ ok: false, error: { type, message } });

describe("GET /v1/sessions/{key}", () => {
  it("returns the row of an existing session and 404 for an unknown one (without creating it)", async () => {
    const key = "agent:main:rest-get";
    await sendAndWait(key, "hello", { channel: "webchat", to: "u1", accountId: "acct", displayName: "U One" });
    const r = await call("GET", `/v1/sessions/${enc(key)}`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      key,
      kind: "other",
      channel: "webchat",
      displayName: "U One",
      lastChannel: "webchat",
      lastTo: "u1",
      deliveryContext: { channel: "webchat", to: "u1", accountId: "acct" },
      transcriptPath: `/v1/sessions/${enc(key)}/transcript.jsonl`,
      model: "echo",
      systemSent: true,
      abortedLastRun: false,
    });
    const missing = await call("GET", `/v1/sessions/${enc("agent:main:rest-nope")}`);
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual(err("not_found", "Session not found: agent:main:rest-nope"));
    expect(
      await runInDurableObject(sessionStub("agent:main:rest-nope"), (_o, s) => s.storage.sql.databaseSize),
    ).toBeLessThan(10_000);
    expect((await call("GET", `/v1/sessions/${enc("agent:main:rest-nope")}`)).status).toBe(404);
  });
});

describe("PATCH /v1/sessions/{key}", () => {
  const key = "agent:main:rest-patch";

  it("sets and clears label, model, thinkingLevel, verboseLevel and sendPolicy", async () => {
    await sendAndWait(key, "x");
    const p = await call("PATCH", `/v1/sessions/${enc(key)}`, {
      label: "  Research notes ",
      model: "builtin/echo",
      thinkingLevel: "high",
      verboseLevel: "on",
      sendPolicy: "DENY",
    });
    expect(p.status).toBe(200);
    expect(p.json).toMatchObject({
      key,
      label: "Research notes",
      thinkingLevel: "high",
      verboseLevel: "on",
      sendPolicy: "deny",
    });
    const listed = await invoke("sessions_list", { limit: 200 }, { sessionKey: key });
    expect(listed.details.sessions.find((r: any) => r.key === key)).toMatchObject({
      label: "Research notes",
      sendPolicy: "deny",
      thinkingLevel: "high",
    });
    const cleared = await call("PATCH", `/v1/sessions/${enc(key)}`, {
      label: null,
      sendPolicy: null,
      thinkingLevel: null,
    });
    expect(cleared.status).toBe(200);
    expect(cleared.json.label).toBeUndefined();
    expect(cleared.json.sendPolicy).toBeUndefined();
    expect(cleared.json.thinkingLevel).toBeUndefined();
    expect(cleared.json.verboseLevel).toBe("on");
  });

  it.each([
    [{ label: "" }, "invalid label: empty"],
    [{ label: "   " }, "invalid label: empty"],
    [{ label: 7 }, "label: "],
    [{ label: "x".repeat(513) }, "invalid label: too long (max 512)"],
    // A bare id is OpenClaw's default provider's (openai), which has no key here.
    [{ model: "nope" }, 'invalid model: nope (no API key for provider "openai"'],
    [{ model: "builtin/gpt" }, "invalid model: builtin/gpt (builtin models: builtin/echo)"],
    [{ model: "acme/m1" }, 'invalid model: acme/m1 (unknown provider "acme"; configure models.providers.acme)'],
    [{ sendPolicy: "maybe" }, 'invalid sendPolicy (use "allow"|"deny")'],
    [{}, "body: nothing to change"],
  ])("rejects %j with a 400 and changes nothing", async (body, message) => {
    await sendAndWait(key, "y");
    const before = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    const r = await call("PATCH", `/v1/sessions/${enc(key)}`, body);
    expect(r.status).toBe(400);
    expect(r.json).toEqual(err("invalid_request", expect.stringContaining(message)));
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).json).toEqual(before);
  });

  it("a 512-character label is accepted; a model listed by a configured provider is accepted", async () => {
    setConfigOverride({
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
      models: { providers: { acme: { baseUrl: "https://llm.test/v1", models: [{ id: "m1" }] } } },
    });
    expect((await call("PATCH", `/v1/sessions/${enc(key)}`, { label: "l".repeat(512) })).status).toBe(200);
    const m = await call("PATCH", `/v1/sessions/${enc(key)}`, { model: "acme/m1" });
    expect(m.status).toBe(200);
    expect(m.json.model).toBe("echo"); // the row shows the model of the last run until the next run
    const bad = await call("PATCH", `/v1/sessions/${enc(key)}`, { model: "acme/m2" });
    expect(bad.json.error.message).toBe(
      'invalid model: acme/m2 (model "m2" is not listed in models.providers.acme.models)',
    );
  });
});

describe("DELETE /v1/sessions/{key}", () => {
  it("deletes a session: storage cleared, index row removed, reads 404, the key is reusable", async () => {
    const key = "agent:main:rest-del";
    const first = await sendAndWait(key, "to be deleted");
    const r = await call("DELETE", `/v1/sessions/${enc(key)}`);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, deleted: key });
    expect((await call("GET", `/v1/sessions/${enc(key)}`)).status).toBe(404);
    expect((await call("GET", `/v1/runs/${first.runId}`)).status).toBe(404);
    const tables = await runInDurableObject(sessionStub(key), (_o, s) =>
      s.storage.sql
        .exec<{ name: string }>(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%'",
        )
        .toArray(),
    );
    expect(tables).toEqual([]);
    expect(await sessionIndex(env, loadConfig(env), "main").get(key)).toBeNull();
    const list = await invoke("sessions_list", { limit: 200 }, { sessionKey: "agent:main:main" });
    expect(list.details.sessions.map((s: any) => s.key)).not.toContain(key);
    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(404);
    // A deleted key starts over as a fresh session (new sessionId, empty transcript).
    const again = await sendAndWait(key, "reborn");
    expect(again.status).toBe("ok");
    const hist = await call("GET", `/v1/sessions/${enc(key)}/history`);
    expect(hist.json.messages.map((m: any) => m.content[0]?.text)).toEqual(["reborn", "reborn"]);
  });

  it("deleting a session with a run in flight aborts it, releases its waiters and leaves nothing behind", async () => {
    const fake = useFakeProvider();
    const key = "agent:main:rest-del-busy";
    const run = (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "busy" })).json.runId;
    const queued = (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "queued" })).json.runId;
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const waiting = call("GET", `/v1/runs/${run}/wait?timeoutMs=60000`);
    await vi.waitFor(async () =>
      expect(await runInDurableObject(sessionStub(key), (obj) => (obj as any).queue.waiters.size)).toBe(1),
    );
    expect((await call("DELETE", `/v1/sessions/${enc(key)}`)).status).toBe(200);
    expect((await waiting).json).toMatchObject({ runId: run, status: "aborted", error: "session deleted" });
    await vi.waitFor(() => expect(fake.calls[0].aborted).toBe(true));
    expect((await call("GET", `/v1/runs/${queued}`)).status).toBe(404);
    expect(await sessionIndex(env, loadConfig(env), "main").get(key)).toBeNull();
    expect(fake.calls).toHaveLength(1);
    expect(await runInDurableObject(sessionStub(key), (_o, s) => s.storage.getAlarm())).toBeNull();
  });

  it("never deletes a main session (also through aliases)", async () => {
    await sendAndWait("main", "keep me");
    for (const k of ["main", "agent:main:main", "current"]) {
      const r = await call("DELETE", `/v1/sessions/${enc(k)}`);
      expect(r.status).toBe(400);
      expect(r.json).toEqual(err("invalid_request", "Cannot delete the main session (agent:main:main)."));
    }
    expect((await call("GET", "/v1/sessions/main")).status).toBe(200);
  });
});

describe("history and transcript.jsonl", () => {
  it("GET history pages with limit/before; transcript.jsonl streams a header and every message", async () => {
    const key = "agent:main:rest-hist";
    for (let i = 1; i <= 3; i++) await sendAndWait(key, `m${i}`);
    const page = await call("GET", `/v1/sessions/${enc(key)}/history?limit=2`);
    expect(page.status).toBe(200);
    expect(page.json).toMatchObject({ sessionKey: key, hasMore: true });
    expect(page.json.messages.map((m: any) => m.content[0].text)).toEqual(["m3", "m3"]);
    const older = await call("GET", `/v1/sessions/${enc(key)}/history?limit=10&before=${page.json.nextBefore}`);
    expect(older.json.messages.map((m: any) => m.content[0].text)).toEqual(["m1", "m1", "m2", "m2"]);
    expect(older.json).toMatchObject({ hasMore: false, nextBefore: null });
    expect((await call("GET", `/v1/sessions/${enc(key)}/history?limit=abc`)).status).toBe(400);
    expect((await call("GET", `/v1/sessions/${enc(key)}/history?limit=0`)).status).toBe(400);

    const res = await call("GET", `/v1/sessions/${enc(key)}/transcript.jsonl`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/x-ndjson");
    const lines = (res.json as string)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const meta = (await call("GET", `/v1/sessions/${enc(key)}`)).json;
    expect(lines[0]).toMatchObject({ type: "session", version: 1, id: meta.sessionId, key });
    expect(lines.slice(1).map((l) => [l.type, l.seq, l.message.role, l.message.content[0].text])).toEqual([
      ["message", 1, "user", "m1"],
      ["message", 2, "assistant", "m1"],
      ["message", 3, "user", "m2"],
      ["message", 4, "assistant", "m2"],
      ["message", 5, "user", "m3"],
      ["message", 6, "assistant", "m3"],
    ]);
    expect(lines[1].message.__switchboard).toBeUndefined();
    expect(typeof lines[1].timestamp).toBe("string");
    // The row's transcriptPath is that very URL.
    expect(meta.transcriptPath).toBe(`/v1/sessions/${enc(key)}/transcript.jsonl`);
    expect((await call("GET", `/v1/sessions/${enc("agent:main:rest-none")}/transcript.jsonl`)).status).toBe(404);
  });
});

describe("GET /v1/agents, /healthz", () => {
  it("lists configured agents with their default, model and runtime", async () => {
    setConfigOverride({
      agents: {
        defaults: { sandbox: { mode: "all" } },
        list: [{ id: "a" }, { id: "b", default: true, model: "builtin/echo", sandbox: { mode: "off" } }],
      },
    });
    const r = await call("GET", "/v1/agents");
    expect(r.json).toEqual({
      defaultAgentId: "b",
      agents: [
        {
          id: "a",
          default: false,
          model: "builtin/echo",
          sandboxed: true,
          sandbox: "all",
          runtime: "model",
          available: true,
        },
        {
          id: "b",
          default: true,
          model: "builtin/echo",
          sandboxed: false,
          sandbox: "off",
          runtime: "model",
          available: true,
        },
      ],
    });
    const h = await call("GET", "/healthz", undefined, { token: null });
    expect(h.json).toEqual({ ok: true, agents: ["a", "b"] });
  });
});

describe("one error envelope everywhere", () => {
  it("unknown routes are a 404 envelope", async () => {
    for (const path of ["/", "/nope", "/v1/nope", "/v1/sessions/main/nope", "/tools/nope"]) {
      const r = await call("GET", path);
      expect(r.status, path).toBe(404);
      expect(r.json).toEqual(err("not_found", `No route for GET ${path}`));
    }
  });

  it("a known route with the wrong method is a 405 envelope with Allow", async () => {
    for (const [method, path] of [
      ["GET", "/tools/invoke"],
      ["PUT", "/v1/sessions/main/messages"],
      ["GET", "/v1/runs/x/abort"],
      ["POST", "/v1/sessions"],
      ["POST", "/v1/sessions/main"],
      ["PUT", "/v1/sessions/main/history"],
      ["DELETE", "/v1/agents"],
      ["POST", "/healthz"],
      ["POST", "/v1/runs/x/wait"],
    ] as const) {
      const r = await call(method, path, method === "GET" ? undefined : {});
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.json.ok).toBe(false);
      expect(r.json.error.type).toBe("method_not_allowed");
    }
    // Hono's methodNotAllowed lists HEAD beside GET: Hono answers HEAD for every GET route.
    const r = await call("POST", "/v1/sessions/main");
    expect(r.headers.get("Allow")).toBe("GET, HEAD, PATCH, DELETE");
    const mcp = await call("GET", "/mcp");
    expect(mcp.status).toBe(405);
    expect(mcp.headers.get("Allow")).toBe("POST");
  });

  it("unknown runs are a 404 envelope", async () => {
    const forged = (key: string) =>
      `/v1/runs/${crypto.randomUUID()}.${btoa(key).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_")}`;
    for (const path of [
      "/v1/runs/not-a-run",
      forged("agent:main:never"),
      forged("agent::malformed"),
      forged("unknown"),
    ]) {
      const r = await call("GET", path);
      expect(r.status).toBe(404);
      expect(r.json.error.type).toBe("not_found");
      expect((await call("POST", `${path}/abort`)).status).toBe(404);
      expect((await call("GET", `${path}/wait?timeoutMs=0`)).status).toBe(404);
    }
  });
});

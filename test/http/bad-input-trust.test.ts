import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { call, enc, invoke, sessionStub } from "../helpers/http";
import { installFakes, requesterKey, subagentConfig } from "../helpers/subagents";

/**
 * Bad input never reaches a 500 or a foreign origin (docs/limits.md): attachment media types are checked at
 * the input and files are served as downloads; run ids address the canonical session; CONFIG timeouts have
 * a maximum.
 */

const withAttachments = () =>
  setConfigOverride(subagentConfig({ tools: { sessions_spawn: { attachments: { enabled: true } } } }));

describe("attachment media types", () => {
  it("a mimeType that is not a media type (CR/LF, no subtype) is a 400 naming it, and nothing is spawned", async () => {
    withAttachments();
    installFakes(() => "hang");
    const req = requesterKey("mime-bad");
    for (const mimeType of ["text/plain\r\nSet-Cookie: a=b", "text", "text/plain; charset", "<b>/x"]) {
      const r = await invoke(
        "sessions_spawn",
        { task: "t", attachments: [{ name: "a.txt", content: "hi", mimeType }] },
        { sessionKey: req },
      );
      expect(r.status, mimeType).toBe(400);
      expect(r.body.error.message).toMatch(/^attachments\.0\.mimeType: expected a media type/);
    }
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
  });

  it("files are served as downloads, nosniff and sandboxed, whatever their type — text/html is never rendered here", async () => {
    withAttachments();
    installFakes(() => "hang");
    const req = requesterKey("mime-html");
    const page = "<script>alert(document.cookie)</script>";
    const spawned = await invoke(
      "sessions_spawn",
      {
        task: "t",
        attachments: [
          { name: "page.html", content: page, mimeType: " text/html; charset=utf-8 " },
          { name: 'résumé "v2".txt', content: "cv", mimeType: "text/plain" },
        ],
      },
      { sessionKey: req },
    );
    expect(spawned.details.status).toBe("accepted");
    const child = spawned.details.childSessionKey as string;
    const html = await call("GET", `/v1/sessions/${enc(child)}/attachments/page.html`);
    expect(html.status).toBe(200);
    expect(html.json).toBe(page);
    expect(html.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(html.headers.get("content-disposition")).toBe(
      `attachment; filename="page.html"; filename*=UTF-8''page.html`,
    );
    expect(html.headers.get("x-content-type-options")).toBe("nosniff");
    expect(html.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    const cv = await call("GET", `/v1/sessions/${enc(child)}/attachments/${enc('résumé "v2".txt')}`);
    expect(cv.headers.get("content-disposition")).toBe(
      `attachment; filename="r_sum_ _v2_.txt"; filename*=UTF-8''${encodeURIComponent('résumé "v2".txt')}`,
    );
  });

  it("a type stored before types were checked is served as application/octet-stream, never a broken header (500)", async () => {
    withAttachments();
    installFakes(() => "hang");
    const req = requesterKey("mime-legacy");
    const spawned = await invoke(
      "sessions_spawn",
      { task: "t", attachments: [{ name: "old.bin", content: "x" }] },
      { sessionKey: req },
    );
    const child = spawned.details.childSessionKey as string;
    await runInDurableObject(sessionStub(child), async (_obj, state) =>
      state.storage.sql.exec("UPDATE attachments SET mime_type = ? WHERE name = 'old.bin'", "text/html\r\nX-Evil: 1"),
    );
    const r = await call("GET", `/v1/sessions/${enc(child)}/attachments/old.bin`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/octet-stream");
    expect(r.headers.get("x-evil")).toBeNull();
  });
});

describe("run ids address the canonical session", () => {
  it("a run id naming `main` (or another spelling of a key) is a 404 that reaches no object: minted ids carry the canonical key (src/http/handle-owner.ts)", async () => {
    const names: string[] = [];
    const getByName = env.SESSIONS.getByName.bind(env.SESSIONS);
    vi.spyOn(env.SESSIONS, "getByName").mockImplementation((name: string) => {
      names.push(name);
      return getByName(name);
    });
    for (const raw of ["main", "AGENT:MAIN:Mixed-Case"]) {
      const forged = `${crypto.randomUUID()}.${btoa(raw).replace(/=+$/, "")}`;
      for (const path of [`/v1/runs/${forged}`, `/v1/runs/${forged}/wait?timeoutMs=0`]) {
        expect((await call("GET", path)).status).toBe(404);
      }
    }
    expect(names).not.toContain("main");
    expect(names).not.toContain("AGENT:MAIN:Mixed-Case");
    expect(names).not.toContain("agent:main:main");
    expect(names).not.toContain("agent:main:mixed-case");
  });
});

describe("CONFIG timeouts have a maximum", () => {
  it("timeoutSeconds and subagents.runTimeoutSeconds beyond 30 days are clamped, with a warning", async () => {
    setConfigOverride({
      agents: {
        defaults: { timeoutSeconds: 1e12, subagents: { runTimeoutSeconds: 9e15 } },
        list: [{ id: "main", default: true }],
      },
    });
    const cfg = (await call("GET", "/v1/config")).json;
    expect(cfg.config.agents.defaults.timeoutSeconds).toBe(2_592_000);
    expect(cfg.config.agents.defaults.subagents.runTimeoutSeconds).toBe(2_592_000);
    expect(cfg.warnings).toEqual(
      expect.arrayContaining([
        "agents.defaults.timeoutSeconds: 1000000000000 clamped to 2592000 (range 0–2592000)",
        "agents.defaults.subagents.runTimeoutSeconds: 9000000000000000 clamped to 2592000 (range 0–2592000)",
      ]),
    );
    // A run still gets a real deadline.
    const run = await call("POST", `/v1/sessions/${enc("agent:main:clamped")}/messages`, { message: "x" });
    expect((await call("GET", `/v1/runs/${run.json.runId}/wait?timeoutMs=5000`)).json.status).toBe("ok");
  });
});

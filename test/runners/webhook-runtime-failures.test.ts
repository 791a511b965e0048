import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { mintRunToken } from "../../src/runners/run-token";
import { timeouts } from "../../src/timeout-signal";
import { getRun, installFakeRuntime, newKey, posted, runtime, send } from "../helpers/fake-runtime";
import { advance, call } from "../helpers/http";

beforeEach(() => installFakeRuntime());

describe("webhook agent runtimes: failures and limits", () => {
  it("a runtime that never answers ends in timeout at the run's deadline, and its token is refused", async () => {
    const key = newKey();
    const runId = await send(key, "anyone there?");
    await posted();
    await advance(key, 121_000);
    const run = await getRun(runId);
    expect(run.status).toBe("timeout");
    expect(run.error).toMatch(/^Run timed out after \d+(\.\d)?s$/);
    const late = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { reply: "too late" },
      { token: runtime.received[0].req.runToken },
    );
    expect(late.status).toBe(401);
    expect(late.json.error.message).toBe(`Run token no longer valid: run ${runId} has ended (timeout)`);
  });

  it("expired and forged run tokens are refused", async () => {
    const key = newKey();
    const runId = await send(key, "tokens");
    await posted();
    const { runToken } = runtime.received[0].req;
    const claims = { runId, sessionKey: key, agentId: "hook", isSubagent: false };
    const expired = await mintRunToken(env.SIGNING_SECRET as string, { ...claims, expiresAt: Date.now() - 1 });
    const r1 = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token: expired },
    );
    expect(r1).toMatchObject({
      status: 401,
      json: {
        ok: false,
        error: { type: "unauthorized", message: `Run token expired: run ${runId} passed its deadline` },
      },
    });

    // Signed with another secret, or claims swapped under a genuine MAC: not a token at all.
    const wrongSecret = await mintRunToken("not-the-secret", { ...claims, expiresAt: Date.now() + 60_000 });
    const [prefix, , mac] = runToken.split(".");
    const swapped = `${prefix}.${btoa(JSON.stringify({ v: 1, ...claims, sessionKey: "agent:hook:main", expiresAt: Date.now() + 60_000 })).replace(/=+$/, "")}.${mac}`;
    for (const forged of [wrongSecret, swapped, `${runToken}x`]) {
      const r = await call(
        "POST",
        "/tools/invoke",
        { tool: "sessions_history", args: { sessionKey: "current" } },
        { token: forged },
      );
      expect(r).toMatchObject({
        status: 401,
        json: { ok: false, error: { type: "unauthorized", message: "Invalid bearer token" } },
      });
    }
    // The genuine token still works while the run runs.
    const ok = await call(
      "POST",
      "/tools/invoke",
      { tool: "sessions_history", args: { sessionKey: "current" } },
      { token: runToken },
    );
    expect(ok.status).toBe(200);
    await call("POST", `/v1/runs/${runId}/complete`, { reply: "bye" }, { token: runToken });
  });

  it("runtime failures end the run error with a clear message", async () => {
    runtime.respond = () => new Response("boom", { status: 500 });
    const a = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${a}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered HTTP 500",
    });
    runtime.respond = () => new Response("not json", { status: 200 });
    const b = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${b}/wait?timeoutMs=10000`)).json.error).toMatch(
      /^webhook runtime answered 200 without a JSON body/,
    );
    runtime.respond = () => Response.json({ error: "model quota exceeded" });
    const c = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${c}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "model quota exceeded",
    });
  });

  it("outbound safety: a redirect is a failure (never followed), a slow runtime times out, a huge answer is not buffered", async () => {
    let init: RequestInit | undefined;
    runtime.respond = (_req, i) => {
      init = i;
      return new Response(null, { status: 302, headers: { Location: "https://elsewhere.test/steal" } });
    };
    const redirected = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${redirected}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered HTTP 302 (redirects are not followed)",
    });
    expect(init?.redirect).toBe("manual");
    expect(runtime.received.filter((r) => r.req.runId === redirected)).toHaveLength(1);

    // Never answering: the request is cut at the run's deadline (at most 15 min), here shortened to 20 ms.
    const realTimeout = timeouts.signal.bind(timeouts);
    const asked: number[] = [];
    vi.spyOn(timeouts, "signal").mockImplementation((ms: number, parent?: AbortSignal) => {
      asked.push(ms);
      return realTimeout(20, parent);
    });
    runtime.respond = (_req, i) =>
      new Promise((_, reject) => i?.signal?.addEventListener("abort", () => reject(i.signal!.reason)));
    const slow = await send(newKey(), "x");
    const slowRun = (await call("GET", `/v1/runs/${slow}/wait?timeoutMs=10000`)).json;
    expect(slowRun.status).toBe("error");
    expect(slowRun.error).toMatch(
      /^webhook runtime did not answer within \d+ms \(answer 202 and complete later for long runs\)$/,
    );
    expect(asked.length).toBeGreaterThan(0);
    expect(Math.max(...asked)).toBeLessThanOrEqual(120_000); // the run's deadline (timeoutSeconds 120)
    vi.mocked(timeouts.signal).mockRestore();

    // An endless 200 body: reading stops at the cap.
    let pulled = 0;
    runtime.respond = () =>
      new Response(
        new ReadableStream({
          pull(ctrl) {
            pulled += 65_536;
            ctrl.enqueue(new Uint8Array(65_536).fill(32));
          },
        }),
        { status: 200 },
      );
    const huge = await send(newKey(), "x");
    expect((await call("GET", `/v1/runs/${huge}/wait?timeoutMs=10000`)).json).toMatchObject({
      status: "error",
      error: "webhook runtime answered more than 4194304 bytes",
    });
    expect(pulled).toBeLessThan(4_194_304 + 5 * 65_536);
  });
});

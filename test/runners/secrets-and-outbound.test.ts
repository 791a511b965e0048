import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { logEvent, rememberSecrets } from "../../src/log";
import { PROVIDER_LIMITS } from "../../src/runners/provider-fetch";
import { call, enc, GATEWAY, MAIN_TOKEN, sendAndWait } from "../helpers/http";

/**
 * Nothing secret leaks, nothing goes where it should not (docs/limits.md): logs are scrubbed before they are
 * cut; URLs lose their credentials — path tokens of Slack, Discord and Telegram webhooks included — in
 * GET /v1/config and in logs; webhook runtimes are https (loopback http only); model providers get no
 * redirects followed, a time and a size bound; idempotency keys belong to the principal that chose them.
 */

const DEFAULT_LIMITS = { ...PROVIDER_LIMITS };
afterEach(() => {
  Object.assign(PROVIDER_LIMITS, DEFAULT_LIMITS);
});

function captureLogs(): string[] {
  const lines: string[] = [];
  for (const method of ["log", "warn", "error"] as const)
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
      lines.push(args.map(String).join(" "));
    });
  return lines;
}

const SLACK_TOKEN = "abcdEFGH1234ijklMNOP5678";
const DISCORD_TOKEN = "AbCdEf-123456_ghIJKLmnopQRSTuvwxYZ0123456789abcdefGHIJKL";
const TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const RUNTIME_PATH_TOKEN = "s3cr3tPathTokenABCDEF12";
const URLS = {
  slack: `https://hooks.slack.com/services/T0000AAAA/B0000BBBB/${SLACK_TOKEN}`,
  discord: `https://discord.com/api/webhooks/123456789012345678/${DISCORD_TOKEN}`,
  telegram: `https://api.telegram.org/bot${TELEGRAM_TOKEN}/sendMessage`,
  runtime: `https://agent.example.com/run/${RUNTIME_PATH_TOKEN}`,
};
const PATH_SECRETS = [SLACK_TOKEN, DISCORD_TOKEN, TELEGRAM_TOKEN, TELEGRAM_TOKEN.split(":")[1], RUNTIME_PATH_TOKEN];

describe("secrets in logs and the effective config", () => {
  it("a string is scrubbed before it is cut: a secret across the cut leaves nothing of itself", () => {
    rememberSecrets([GATEWAY, MAIN_TOKEN]);
    const lines = captureLogs();
    for (const before of [1990, 1995, 1999]) {
      logEvent("warn", "cut_check", { detail: `${"a".repeat(before)}${GATEWAY} and ${MAIN_TOKEN}` });
    }
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line).not.toContain(GATEWAY.slice(0, 6));
      expect(line).not.toContain(MAIN_TOKEN.slice(0, 6));
    }
  });

  it("URL credentials — user info, secret query parameters and token path segments — are removed from logs", () => {
    const lines = captureLogs();
    logEvent("warn", "delivery_failed", {
      error: `POST ${URLS.slack} failed; retrying ${URLS.discord} and ${URLS.telegram}; runtime ${URLS.runtime}?token=abc123`,
      url: "https://user:pass@example.com/x?api_key=k-123",
    });
    const line = lines.join("\n");
    for (const s of [...PATH_SECRETS, "pass@", "k-123", "abc123"]) expect(line, s).not.toContain(s);
    expect(line).toContain("https://hooks.slack.com/services/T0000AAAA/B0000BBBB/[redacted]");
    expect(line).toContain("https://api.telegram.org/[redacted]/sendMessage");
  });

  it("GET /v1/config shows the hosts of webhook and runtime URLs, not the tokens in their paths", async () => {
    setConfigOverride({
      agents: { entries: { main: { default: true }, hook: { runtime: { type: "webhook", url: URLS.runtime } } } },
      channels: {
        slack: { outbound: { url: URLS.slack } },
        discord: { outbound: { url: URLS.discord } },
        telegram: { outbound: { url: URLS.telegram } },
      },
    });
    const r = await call("GET", "/v1/config");
    expect(r.status).toBe(200);
    const text = JSON.stringify(r.json);
    for (const s of PATH_SECRETS) expect(text, s).not.toContain(s);
    expect(r.json.config.channels.discord.outbound.url).toBe(
      "https://discord.com/api/webhooks/123456789012345678/[redacted]",
    );
    expect(r.json.config.channels.telegram.outbound.url).toBe("https://api.telegram.org/[redacted]/sendMessage");
    expect(r.json.config.agents.entries.hook.runtime.url).toBe("https://agent.example.com/run/[redacted]");
  });
});

describe("webhook runtime URLs", () => {
  it("plain http:// is a config error, except for a loopback host", async () => {
    const withRuntime = (url: string) =>
      setConfigOverride({
        agents: { entries: { main: { default: true }, hook: { runtime: { type: "webhook", url } } } },
      });
    withRuntime("http://agent.example.com/run");
    const refused = await call("GET", "/v1/agents");
    expect(refused.status).toBe(500);
    expect(refused.json.error.type).toBe("config_error");
    expect(refused.json.error.message).toMatch(/agents\.entries\.hook\.runtime\.url: expected an https:\/\/ URL/);
    for (const url of [
      "http://localhost:8788/run",
      "http://127.0.0.1:8788/run",
      "http://[::1]:8788/run",
      "https://agent.example.com/run",
    ]) {
      withRuntime(url);
      expect((await call("GET", "/v1/agents")).status, url).toBe(200);
    }
  });
});

const MODEL_BASE = "https://llm.test/v1";
function useProvider(answer: (url: string, init?: RequestInit) => Promise<Response> | Response): string[] {
  setConfigOverride({
    agents: { defaults: { model: "fake/m1" }, list: [{ id: "main", default: true }] },
    models: { providers: { fake: { baseUrl: MODEL_BASE, apiKey: "provider-key-123456", api: "openai-completions" } } },
  });
  const urls: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    urls.push(url);
    return answer(url, init);
  });
  return urls;
}

const sessionKey = () => `agent:main:provider-${crypto.randomUUID().slice(0, 8)}`;

describe("model provider calls", () => {
  it("a redirect is never followed: the call fails and the API key goes nowhere else", async () => {
    const urls = useProvider((url, init) => {
      expect(init?.redirect).toBe("manual");
      return url.startsWith(MODEL_BASE)
        ? new Response(null, { status: 307, headers: { Location: "https://elsewhere.test/steal" } })
        : new Response("stolen");
    });
    const run = await sendAndWait(sessionKey(), "hi");
    expect(run.status).toBe("error");
    expect(run.error).toMatch(/redirects are not followed/);
    expect(urls.some((u) => u.startsWith("https://elsewhere.test"))).toBe(false);
  });

  it("a response past maxResponseBytes fails the run instead of being buffered", async () => {
    PROVIDER_LIMITS.maxResponseBytes = 4096;
    let pulled = 0;
    // One streamed event that never ends: a parser would wait for its end while the body grows.
    useProvider(
      () =>
        new Response(
          new ReadableStream({
            pull(c) {
              const text = pulled === 0 ? 'data: {"choices":[{"index":0,"delta":{"content":"' : "x".repeat(1024);
              pulled += text.length;
              c.enqueue(new TextEncoder().encode(text));
            },
          }),
          { headers: { "Content-Type": "text/event-stream" } },
        ),
    );
    const run = await sendAndWait(sessionKey(), "hi");
    expect(run.status).toBe("error");
    expect(run.error).toMatch(/more than 4096 bytes/);
    expect(pulled).toBeLessThan(16 * 1024);
  });

  it("a provider that never finishes is cut at timeoutMs", async () => {
    PROVIDER_LIMITS.timeoutMs = 50;
    useProvider(
      (_url, init) =>
        new Promise<Response>((_, reject) =>
          init?.signal?.addEventListener("abort", () => reject(init.signal!.reason)),
        ),
    );
    const run = await sendAndWait(sessionKey(), "hi");
    expect(run.status).toBe("error");
    expect(run.error).toMatch(/did not finish within 0s|did not finish within/);
  });
});

describe("idempotency keys belong to their principal", () => {
  it("an agent token cannot pre-claim the key a bridge (operator token) will use", async () => {
    const key = `agent:main:idem-${crypto.randomUUID().slice(0, 8)}`;
    const idem = `bridge-msg-${crypto.randomUUID().slice(0, 8)}`;
    const send = (message: string, token: string) =>
      call("POST", `/v1/sessions/${enc(key)}/messages`, { message, idempotencyKey: idem }, { token });
    const squatted = await send("squatted by the agent token", MAIN_TOKEN);
    const bridge = await send("the bridge's real message", GATEWAY);
    expect(bridge.json.runId).not.toBe(squatted.json.runId);
    // Each principal's own retry is still the same run.
    expect((await send("the bridge's real message", GATEWAY)).json.runId).toBe(bridge.json.runId);
    expect((await send("again", MAIN_TOKEN)).json.runId).toBe(squatted.json.runId);
    await call("GET", `/v1/runs/${bridge.json.runId}/wait?timeoutMs=5000`);
    const history = (await call("GET", `/v1/sessions/${enc(key)}/history`)).json;
    expect(history.messages.filter((m: any) => m.role === "user").map((m: any) => m.content[0].text)).toContain(
      "the bridge's real message",
    );
  });
});

import { expect, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { WebhookRunRequest } from "../../src/runners/webhook-runner";
import { call, enc } from "./http";
import { until } from "./scripted";

export const RUNTIME_URL = "https://runtime.test/agent";
export const RUNTIME_SECRET = "runtime-secret";
/** Channel receivers the fake answers 200 (a channel's `outbound.url` under it). */
export const HOOKS_URL = "https://hooks.test/";

/** A fake agent runtime living "outside": it sees every run POST and answers with `respond`. */
export const runtime: {
  received: { req: WebhookRunRequest; headers: Headers; raw: string }[];
  respond: (run: WebhookRunRequest, init?: RequestInit) => Promise<Response> | Response;
} = { received: [], respond: () => new Response(null, { status: 202 }) };

export interface FakeRuntimeOptions {
  /** `agents.defaults` of the config (default: a 120 s run timeout). */
  defaults?: Record<string, unknown>;
  /** `channels` of the config: outbound URLs under https://hooks.test/ are answered 200 by the fake. */
  channels?: Record<string, unknown>;
}

/**
 * Agent `hook` runs on the fake runtime, which accepts every run (202) until a test says otherwise
 * (`runtime.respond`); agent `main` (the default) on the built-in model. Call in beforeEach: test/setup.ts
 * restores the fetch spy and the config after each test.
 */
export function installFakeRuntime(opts: FakeRuntimeOptions = {}): void {
  runtime.received = [];
  runtime.respond = () => new Response(null, { status: 202 });
  setConfigOverride({
    agents: {
      defaults: opts.defaults ?? { timeoutSeconds: 120 },
      entries: {
        main: { default: true },
        hook: { runtime: { type: "webhook", url: RUNTIME_URL, secret: RUNTIME_SECRET } },
      },
    },
    ...(opts.channels ? { channels: opts.channels } : {}),
  });
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.startsWith(HOOKS_URL)) return new Response("", { status: 200 });
    if (!url.startsWith(RUNTIME_URL)) return realFetch(input, init);
    const raw = String(init?.body);
    const req = JSON.parse(raw) as WebhookRunRequest;
    runtime.received.push({ req, headers: new Headers(init?.headers), raw });
    return runtime.respond(req, init);
  });
}

/** The run POSTs the fake runtime received, in order. */
export const runPosts = () => runtime.received.map((r) => r.req);

/**
 * Until the fake runtime has received `n` run POSTs (one by default). Polled from the test's own timers, never a
 * promise the fake resolves: the fake runs inside the session object's run (same isolate), and a promise it
 * resolves resumes the test inside that object's timer task (the run starts from a timer, src/session/enqueue.ts).
 * The test's next calls would then be that object's I/O, and ending the object's instance from there ends it from
 * inside its own task, which crashes workerd ("Promise callback destroyed itself") and loses the rest of the file.
 */
export const posted = (n = 1) => until(async () => expect(runtime.received.length).toBeGreaterThanOrEqual(n));

export const newKey = (rest = `chat-${crypto.randomUUID().slice(0, 8)}`) => `agent:hook:${rest}`;

export async function send(key: string, message: string, extra: Record<string, unknown> = {}) {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message, ...extra });
  expect(r.status).toBe(202);
  return r.json.runId as string;
}

export const getRun = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json;

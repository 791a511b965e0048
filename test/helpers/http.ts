import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";

/** The test Worker's tokens: random per run (vitest.config.ts), strong enough for src/config/secrets.ts. */
export const GATEWAY = env.GATEWAY_TOKEN;
const agentTokens = JSON.parse(env.AGENT_TOKENS) as { main: string; research: string };
export const MAIN_TOKEN = agentTokens.main;
export const RESEARCH_TOKEN = agentTokens.research;

export interface CallOpts {
  token?: string | null;
  headers?: Record<string, string>;
}

/** Call the Worker like an HTTP client would. */
export async function call(
  method: string,
  path: string,
  body?: unknown,
  opts: CallOpts = {},
): Promise<{ status: number; json: any; headers: Headers }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const token = opts.token === undefined ? GATEWAY : opts.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  let payload: BodyInit | undefined;
  if (body !== undefined) {
    payload = typeof body === "string" ? body : JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  const res = await exports.default.fetch(`https://switchboard.test${path}`, { method, headers, body: payload });
  const text = await res.text();
  let json: any = text;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, headers: res.headers };
}

/** `POST /tools/invoke` returning the payload (`result.details`) or the error envelope. */
export async function invoke(tool: string, args: unknown = {}, opts: CallOpts & { sessionKey?: string } = {}) {
  const r = await call(
    "POST",
    "/tools/invoke",
    { tool, args, ...(opts.sessionKey ? { sessionKey: opts.sessionKey } : {}) },
    opts,
  );
  return { status: r.status, body: r.json, details: r.json?.result?.details };
}

export function enc(key: string): string {
  return encodeURIComponent(key);
}

/** Send an inbound message and wait for its run to finish. */
export async function sendAndWait(
  key: string,
  message: string,
  extra: Record<string, unknown> = {},
  opts: CallOpts = {},
) {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message, ...extra }, opts);
  if (r.status !== 202) throw new Error(`send failed ${r.status} ${JSON.stringify(r.json)}`);
  const w = await call("GET", `/v1/runs/${r.json.runId}/wait?timeoutMs=10000`, undefined, opts);
  return w.json;
}

export function sessionStub(key: string) {
  return env.SESSIONS.getByName(key);
}

/** Run every due timer of a session after moving its clock forward by `ms` (time is driven, never slept). */
export async function advance(key: string, ms: number): Promise<void> {
  const stub = sessionStub(key);
  await runInDurableObject(stub, async (_obj, state) => {
    state.storage.sql.exec("UPDATE timers SET due_at = due_at - ?", ms);
  });
  await runDurableObjectAlarm(stub);
}

/** Flush a session's coalesced registry write now. */
export async function flushIndex(key: string): Promise<void> {
  const stub = sessionStub(key);
  await runInDurableObject(stub, async (_obj, state) => {
    state.storage.sql.exec("UPDATE timers SET due_at = 0 WHERE kind = 'index'");
  });
  await runDurableObjectAlarm(stub);
}

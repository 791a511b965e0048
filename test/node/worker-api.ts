import type { IncomingMessage } from "node:http";

/** A JSON call to the Worker under `wrangler dev` with a bearer token; a non-2xx answer throws with its body. */
export async function callWorker(base: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(new URL(path, base), {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as any;
}

/** The body of a request a test's own server received. */
export async function readBody(req: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of req) body += chunk;
  return body;
}

/**
 * `api` (callWorker with `token` unless another is given) and `invoke` (a tool through /tools/invoke, its
 * result's details) against the Worker at `base()`, read at each call: a test learns it once the Worker runs.
 */
export function workerCalls(base: () => string, token: string) {
  const api = (method: string, path: string, body?: unknown, as = token) => callWorker(base(), as, method, path, body);
  const invoke = async (tool: string, args: Record<string, unknown>, sessionKey: string) =>
    (await api("POST", "/tools/invoke", { tool, args, sessionKey })).result.details;
  return { api, invoke };
}

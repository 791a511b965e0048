// The console's only way to the Worker: same-origin fetch with the bearer token from sessionStorage.
// The token never goes into a URL (it would end up in history, logs and Referer headers).

const TOKEN_KEY = "switchboard.console.token";
export const SIGNED_OUT_EVENT = "switchboard:signed-out";

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export function authHeaders(token = getToken()): Record<string, string> {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** Turn a non-2xx answer into an ApiError from the `{ok:false,error:{type,message}}` envelope. */
export async function errorOf(res: Response): Promise<ApiError> {
  let type = "http_error";
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { type?: string; message?: string } };
    type = body.error?.type ?? type;
    message = body.error?.message ?? message;
  } catch {
    /* not the JSON envelope */
  }
  return new ApiError(res.status, type, message);
}

export async function api<T>(method: string, path: string, body?: unknown, token = getToken()): Promise<T> {
  const headers: Record<string, string> = authHeaders(token);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    const err = await errorOf(res);
    // A token that stopped working (rotated, mistyped) sends the operator back to the sign-in form.
    if (res.status === 401 && token === getToken()) {
      setToken(null);
      window.dispatchEvent(new Event(SIGNED_OUT_EVENT));
    }
    throw err;
  }
  return (await res.json()) as T;
}

export const enc = encodeURIComponent;

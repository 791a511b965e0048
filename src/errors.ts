import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * The one error type of Switchboard. Thrown anywhere (routes, tools, objects' callers),
 * rendered by `app.onError` into the one JSON envelope `{ ok: false, error: { type, message } }`.
 */
export type ErrorType =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "rate_limited"
  | "conflict"
  | "config_error"
  | "internal_error"
  | "unavailable";

const STATUS: Record<ErrorType, ContentfulStatusCode> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  config_error: 500,
  internal_error: 500,
  unavailable: 503,
};

/** Every error type, for the documented envelope (src/http/api-schemas.ts). */
export const ERROR_TYPES = Object.keys(STATUS) as [ErrorType, ...ErrorType[]];

export class SwitchboardError extends Error {
  readonly type: ErrorType;
  readonly status: ContentfulStatusCode;
  readonly retryable: boolean;
  readonly headers: Record<string, string>;

  constructor(type: ErrorType, message: string, opts: { retryable?: boolean; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = "SwitchboardError";
    this.type = type;
    this.status = STATUS[type];
    this.retryable = opts.retryable ?? false;
    this.headers = opts.headers ?? {};
  }

  toEnvelope(): ErrorEnvelope {
    return { ok: false, error: { type: this.type, message: this.message } };
  }
}

export interface ErrorEnvelope {
  ok: false;
  error: { type: ErrorType; message: string };
}

export const invalid = (message: string) => new SwitchboardError("invalid_request", message);
export const notFound = (message: string) => new SwitchboardError("not_found", message);
export const forbidden = (message: string) => new SwitchboardError("forbidden", message);

/**
 * Errors cross the RPC boundary between the Worker and the objects as plain Errors (only the
 * message survives), so objects encode the type into the message and callers decode it here.
 */
const RPC_PREFIX = "SB_ERR:";
export function toRpcError(err: SwitchboardError): Error {
  return new Error(`${RPC_PREFIX}${err.type}:${err.message}`);
}
export function fromRpcError(err: unknown): unknown {
  if (err instanceof SwitchboardError) return err;
  const msg = err instanceof Error ? err.message : "";
  const at = msg.indexOf(RPC_PREFIX);
  if (at < 0) return err;
  const rest = msg.slice(at + RPC_PREFIX.length);
  const sep = rest.indexOf(":");
  return new SwitchboardError(rest.slice(0, sep) as ErrorType, rest.slice(sep + 1));
}

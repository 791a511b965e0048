import { redactUrlCredentials } from "../url-credentials";

/** What stands in for a secret in the effective configuration an operator reads (GET /v1/config). */
export const REDACTED = "[redacted]";

/**
 * Keys whose values are credentials (provider `apiKey`, runtime and channel `secret`, any
 * token or password). Matched by name so a secret added to the config schema later is covered too.
 */
const SECRET_KEY = /secret|api[-_]?key|token|password|authorization|credential/i;

/** A deep copy of `value` with every secret replaced by {@link REDACTED}. */
export function redactSecrets(value: unknown, key = ""): unknown {
  if (key && SECRET_KEY.test(key) && value !== undefined && value !== null && typeof value !== "object")
    return REDACTED;
  // URL credentials, path segments included (Slack/Discord/Telegram webhook tokens): src/url-credentials.ts.
  if (typeof value === "string") return redactUrlCredentials(value);
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v));
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactSecrets(v, k)]));
  return value;
}

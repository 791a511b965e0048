/** What stands in for a secret in the effective configuration an operator reads (GET /v1/config). */
export const REDACTED = "[redacted]";

/**
 * Keys whose values are credentials (provider `apiKey`, runtime and channel `secret`, any
 * token or password). Matched by name so a secret added to the config schema later is covered too.
 */
const SECRET_KEY = /secret|api[-_]?key|token|password|authorization|credential/i;

/** `https://user:pass@host/?token=…` keeps its host and path; credentials in it are replaced. */
function redactUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return value;
  }
  if (!/^https?:$/.test(url.protocol)) return value;
  let changed = false;
  if (url.username || url.password) {
    url.username = url.username ? "redacted" : "";
    url.password = "";
    changed = true;
  }
  for (const name of [...url.searchParams.keys()]) {
    if (SECRET_KEY.test(name) || /^(key|sig|signature)$/i.test(name)) {
      url.searchParams.set(name, REDACTED);
      changed = true;
    }
  }
  return changed ? url.toString() : value;
}

/** A deep copy of `value` with every secret replaced by {@link REDACTED}. */
export function redactSecrets(value: unknown, key = ""): unknown {
  if (key && SECRET_KEY.test(key) && value !== undefined && value !== null && typeof value !== "object")
    return REDACTED;
  if (typeof value === "string") return redactUrl(value);
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v));
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactSecrets(v, k)]));
  return value;
}

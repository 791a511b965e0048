/**
 * Credentials inside URLs, wherever a URL is shown (GET /v1/config, log lines; docs/limits.md): user info,
 * query parameters named like credentials, and path segments that look like one — Slack and Discord
 * webhook tokens (`/services/T…/B…/<token>`, `/api/webhooks/<id>/<token>`), Telegram bot tokens
 * (`/bot<id>:<token>`), a secret path of a runtime URL. The host and the rest of the path stay readable.
 */

export const REDACTED = "[redacted]";

const SECRET_PARAM = /secret|api[-_]?key|token|password|authorization|credential|^(key|sig|signature|code)$/i;

/** A path segment that is probably a credential: long and mixing letters and digits, or holding a `:` (bot tokens). */
function secretSegment(segment: string): boolean {
  const s = decodeURIComponentSafe(segment);
  if (s.includes(":") && s.length >= 8) return true;
  return s.length >= 16 && /[0-9]/.test(s) && /[A-Za-z]/.test(s);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** `value` with the credentials of an http(s) URL replaced; anything that is not such a URL is returned as it is. */
export function redactUrlCredentials(value: string): string {
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
    if (SECRET_PARAM.test(name)) {
      url.searchParams.set(name, REDACTED);
      changed = true;
    }
  }
  const segments = url.pathname.split("/");
  if (segments.some(secretSegment)) {
    url.pathname = segments.map((s) => (secretSegment(s) ? REDACTED : s)).join("/");
    changed = true;
  }
  return changed ? url.toString().replaceAll(encodeURIComponent(REDACTED), REDACTED) : value;
}

/** Every http(s) URL inside a text, its credentials replaced (log lines, error messages). */
export function redactUrlsIn(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(/https?:\/\/[^\s"'<>`]+/gi, (u) => redactUrlCredentials(u));
}

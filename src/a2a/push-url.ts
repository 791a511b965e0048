/**
 * Where an A2A client may have its push notifications sent (docs/protocols.md, "Push notifications"). The URL
 * comes from a remote caller, not from the operator's CONFIG, so it is held to more than a webhook runtime URL
 * (src/runners/runtime-url.ts): https only, no credentials in it, and no host that names this machine or a
 * private network — loopback, private, link-local, CGNAT and unique-local addresses, `localhost` and the
 * `.local`/`.internal`/`.localhost` names. A name is checked as written: what it resolves to is the platform's
 * (Workers do not reach a private network); an address literal is refused here.
 */

/** At most this many characters (docs/limits.md). */
export const PUSH_URL_MAX_CHARS = 2048;

export const PUSH_URL_RULE =
  "expected a public https:// URL (no user info; not localhost, a .local/.internal name or a private, loopback or link-local address)";

const PRIVATE_NAMES = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/;

function privateIpv4(host: string): boolean {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return false;
  const [a, b] = [Number(m[1]), Number(m[2])];
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 198 && (b === 18 || b === 19)) ||
    a >= 224
  );
}

function privateIpv6(host: string): boolean {
  if (!host.includes(":")) return false;
  const h = host.toLowerCase();
  // ::, ::1, IPv4-mapped (::ffff:…, which WHATWG URL writes in hex), unique-local fc00::/7, link-local fe80::/10.
  return h === "::" || h === "::1" || h.startsWith("::ffff:") || /^f[cd]/.test(h) || /^fe[89ab]/.test(h);
}

/** Why `raw` may not be a push URL, or null when it may. */
export function pushUrlProblem(raw: string): string | null {
  if (raw.length > PUSH_URL_MAX_CHARS) return `url: at most ${PUSH_URL_MAX_CHARS} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `url: ${PUSH_URL_RULE}`;
  }
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (url.protocol !== "https:" || url.username || url.password) return `url: ${PUSH_URL_RULE}`;
  if (!host || PRIVATE_NAMES.test(host) || privateIpv4(host) || privateIpv6(host)) return `url: ${PUSH_URL_RULE}`;
  return null;
}

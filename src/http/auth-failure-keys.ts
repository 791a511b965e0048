/**
 * What failed authentications are counted by (docs/limits.md, "Rates and attempts"): the credential that was
 * presented and the address it came from — never a valid token's own use, so nobody's failures lock out
 * somebody else's good token (src/http/auth.ts).
 *
 *  - The credential: a SHA-256 digest of the token (the raw value is never a counter key, a log field or a
 *    map key). A wrong token presented again and again (a stale config, a runtime replaying an ended run's
 *    token) is refused by its own count wherever it comes from.
 *  - The address: `CF-Connecting-IP`. An IPv6 client controls at least a /64 and can rotate through it
 *    freely, so its failures are counted per /64 prefix; an IPv4 address as it is.
 */

/** The counter key of a presented credential: `cred:` + the first 128 bits of its SHA-256, hex. */
export async function credentialKey(token: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)));
  let hex = "";
  for (const b of digest.subarray(0, 16)) hex += b.toString(16).padStart(2, "0");
  return `cred:${hex}`;
}

/** The counter key of a client address: `addr:<IPv4>`, `addr:<first four hextets>::/64`, or `addr:local` without one. */
export function addressKey(raw: string | undefined): string {
  const ip = (raw ?? "").trim();
  if (!ip) return "addr:local";
  if (!ip.includes(":")) return `addr:${ip.slice(0, 64)}`;
  const prefix = ipv6Prefix64(ip);
  return prefix ? `addr:${prefix}::/64` : `addr:${ip.slice(0, 64)}`;
}

/** The first four hextets of an IPv6 address (zero-padded, lower case), or null when it does not parse. */
function ipv6Prefix64(ip: string): string | null {
  const bare = ip
    .replace(/^\[|\]$/g, "")
    .split("%")[0]
    .toLowerCase();
  if (!/^[0-9a-f:.]+$/.test(bare) || bare.length > 45) return null;
  const halves = bare.split("::");
  if (halves.length > 2) return null;
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  // An embedded IPv4 tail (::ffff:192.0.2.1) takes two groups; only the first four groups matter here.
  const tailGroups = tail.length > 0 && tail[tail.length - 1].includes(".") ? tail.length + 1 : tail.length;
  const missing = 8 - head.length - tailGroups;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return null;
  const all = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...tail];
  const first4 = all.slice(0, 4);
  if (first4.some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return null;
  return first4.map((g) => g.padStart(4, "0")).join(":");
}

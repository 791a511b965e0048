import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { addressKey, credentialKey } from "../../src/http/auth-failure-keys";
import { authLimiter } from "../../src/http/rate-limit";
import { call, GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN } from "../helpers/http";

/**
 * No lockout by others' failures (docs/limits.md, "Rates and attempts"): failed authentications are counted
 * per presented credential and per address (IPv6 per /64), and a valid token is never refused, so the few
 * shared egress addresses that Worker-hosted bridges and runtimes call from cannot be locked by anyone's
 * bad tokens. The AUTH_FAILURES binding (10 per key per 60 s) counts across the whole run, so every test
 * uses addresses and tokens of its own.
 */

beforeEach(() => authLimiter.reset());

/** The binding's limit (wrangler.jsonc `ratelimits`). */
const LIMIT = 10;
const unique = () => crypto.randomUUID().slice(0, 8);
const agents = (token: string, ip: string) =>
  call("GET", "/v1/agents", undefined, { token, headers: { "CF-Connecting-IP": ip } });

/** Failing requests from `ips` (round robin), each with a wrong token of its own, until one is answered 429. */
async function failUntilLimited(ips: string[], token: (i: number) => string = () => `guess-${unique()}`) {
  const statuses: number[] = [];
  // The binding counts in fixed periods: a period boundary during the loop may restart a count once.
  for (let i = 0; i < 3 * LIMIT && !statuses.includes(429); i++)
    statuses.push((await agents(token(i), ips[i % ips.length])).status);
  return statuses;
}

describe("auth-failure limits", () => {
  it("an address over its limit: its failing requests are 429, but every valid token from it still works", async () => {
    const shared = `198.18.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    const statuses = await failUntilLimited([shared]);
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.slice(0, -1).every((s) => s === 401)).toBe(true);
    const limited = await agents(`guess-${unique()}`, shared);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    for (const token of [GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN]) expect((await agents(token, shared)).status).toBe(200);
    // No token at all from that address is a failing request too.
    expect(
      (await call("GET", "/v1/agents", undefined, { token: null, headers: { "CF-Connecting-IP": shared } })).status,
    ).toBe(429);
  });

  it("IPv6 addresses are counted per /64: rotating inside one prefix does not escape the limit, another prefix is unaffected", async () => {
    const prefix = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}:${Math.floor(Math.random() * 0xffff).toString(16)}`;
    const rotating = Array.from({ length: 3 * LIMIT }, (_, i) => `${prefix}::${(i + 1).toString(16)}`);
    const statuses = await failUntilLimited(rotating);
    expect(statuses.at(-1)).toBe(429);
    // Another address of the same /64, written in full form.
    expect((await agents(`guess-${unique()}`, `${prefix}:0:0:0:beef`)).status).toBe(429);
    expect((await agents(`guess-${unique()}`, `${prefix.replace("2001:db8:", "2001:db9:")}::1`)).status).toBe(401);
    expect((await agents(GATEWAY, `${prefix}::ffff`)).status).toBe(200);
  });

  it("one wrong credential replayed from many addresses is limited by its own count", async () => {
    const stale = `stale-token-${unique()}`;
    const ips = Array.from({ length: 3 * LIMIT }, (_, i) => `198.19.${Math.floor(Math.random() * 250)}.${i}`);
    const statuses = await failUntilLimited(ips, () => stale);
    expect(statuses.at(-1)).toBe(429);
    // A fresh address with that credential: still 429; a fresh address with another wrong token: its 401.
    expect((await agents(stale, "192.0.2.250")).status).toBe(429);
    expect((await agents(`guess-${unique()}`, "192.0.2.251")).status).toBe(401);
  });

  it("counter keys are a digest of the credential, never the token itself", async () => {
    const keys: string[] = [];
    const limit = env.AUTH_FAILURES!.limit.bind(env.AUTH_FAILURES);
    vi.spyOn(env.AUTH_FAILURES!, "limit").mockImplementation(async (opts) => {
      keys.push(opts.key);
      return limit(opts);
    });
    const secretGuess = `almost-${GATEWAY}`;
    expect((await agents(secretGuess, "192.0.2.252")).status).toBe(401);
    expect(keys).toEqual([await credentialKey(secretGuess), "addr:192.0.2.252"]);
    expect(keys.some((k) => k.includes(secretGuess) || k.includes(GATEWAY))).toBe(false);
    expect(keys[0]).toMatch(/^cred:[0-9a-f]{32}$/);
  });

  it("address keys: IPv4 as is, IPv6 by its /64 in any notation", () => {
    expect(addressKey("203.0.113.9")).toBe("addr:203.0.113.9");
    expect(addressKey("2001:DB8:0:1::5")).toBe("addr:2001:0db8:0000:0001::/64");
    expect(addressKey("2001:db8:0:1:ffff:ffff:ffff:ffff")).toBe("addr:2001:0db8:0000:0001::/64");
    expect(addressKey("[2001:db8::1]")).toBe("addr:2001:0db8:0000:0000::/64");
    expect(addressKey("::ffff:192.0.2.1")).toBe("addr:0000:0000:0000:0000::/64");
    expect(addressKey("fe80::1%eth0")).toBe("addr:fe80:0000:0000:0000::/64");
    expect(addressKey(undefined)).toBe("addr:local");
    expect(addressKey("not:an:address:at:all:::")).toBe("addr:not:an:address:at:all:::");
  });
});

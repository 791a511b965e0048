import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { logEvent } from "../../src/log";
import { MEDIA_TYPE } from "../../src/spawn/attachments";
import { call, enc, GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN, sendAndWait } from "../helpers/http";

/**
 * The trust invariants as generated properties (the cases of test/session/run-lifecycle.test.ts … test/runners/secrets-and-outbound.test.ts,
 * over generated input; seed fixed): no valid token is ever refused for others' failures, forged run ids and
 * long keys never reach a 5xx, attachment types are media types or a clear 400 and are served as downloads,
 * CONFIG timeouts of any size keep the gateway up, URL tokens never show, idempotency keys never cross
 * principals.
 */

const SEED = 2_112_026;
const printable = (min: number, max: number) => fc.stringMatching(new RegExp(`^[\\x21-\\x7e]{${min},${max}}$`));
const hex4 = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const ipv4 = fc.tuple(...Array.from({ length: 4 }, () => fc.integer({ min: 0, max: 255 }))).map((p) => p.join("."));
const ipv6 = fc.array(hex4, { minLength: 8, maxLength: 8 }).map((g) => g.join(":"));
const ipv6Short = fc.tuple(hex4, hex4, hex4).map(([a, b, c]) => `2001:db8:${a}::${b}:${c}`);

/** The rest of a session key, from short to the longest a key may be (long ones made likely: they are the edge). */
const keyRest = fc
  .integer({ min: 1, max: 480 })
  .chain((n) => fc.string({ unit: fc.constantFrom(..."abcxyz0189_-"), minLength: n, maxLength: n }));

describe("trust properties (generated)", () => {
  it("no sequence of failures, from any addresses, makes a valid token refused", { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        // A few shared addresses (as Worker-hosted bridges share egress addresses), many failures from them.
        fc.array(fc.oneof(ipv4, ipv6, ipv6Short), { minLength: 1, maxLength: 3 }),
        fc.array(fc.record({ which: fc.nat(), token: printable(1, 48) }), { minLength: 1, maxLength: 30 }),
        async (ips, failures) => {
          for (const f of failures) {
            const headers = { "CF-Connecting-IP": ips[f.which % ips.length] };
            const r = await call("GET", "/v1/agents", undefined, { token: f.token, headers });
            expect([401, 429]).toContain(r.status);
          }
          for (const ip of ips)
            for (const token of [GATEWAY, MAIN_TOKEN, RESEARCH_TOKEN])
              expect(
                (await call("GET", "/v1/agents", undefined, { token, headers: { "CF-Connecting-IP": ip } })).status,
              ).toBe(200);
        },
      ),
      { seed: SEED, numRuns: 25 },
    );
  });

  it("forged run ids (any text, any encoded key, any length) on every run route: never a 5xx", {
    timeout: 120_000,
  }, async () => {
    const b64url = (s: string) =>
      btoa(String.fromCharCode(...new TextEncoder().encode(s)))
        .replace(/\+/g, "-")
        .replace(/\//g, "_")
        .replace(/=+$/, "");
    const runId = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.tuple(fc.uuid(), fc.string({ unit: "grapheme", maxLength: 700 })).map(([u, k]) => `${u}.${b64url(k)}`),
      fc
        .tuple(fc.uuid(), fc.stringMatching(/^[a-z0-9:-]{1,500}$/))
        .map(([u, rest]) => `${u}.${b64url(`agent:main:${rest}`)}`),
    );
    await fc.assert(
      fc.asyncProperty(runId, async (id) => {
        const path = `/v1/runs/${encodeURIComponent(id)}`;
        for (const [method, suffix, body] of [
          ["GET", "", undefined],
          ["GET", "/wait?timeoutMs=0", undefined],
          ["GET", "/events", undefined],
          ["POST", "/abort", undefined],
          ["POST", "/heartbeat", undefined],
          ["POST", "/complete", { reply: "x" }],
        ] as const) {
          const r = await call(method, `${path}${suffix}`, body);
          expect(r.status, `${method} ${suffix} ${id.slice(0, 80)}`).toBeLessThan(500);
          expect(r.status).toBeGreaterThanOrEqual(200);
        }
      }),
      { seed: SEED, numRuns: 40 },
    );
  });

  it("any session key a client may use (up to 512 characters) streams its ended run: never a 5xx", {
    timeout: 120_000,
  }, async () => {
    await fc.assert(
      fc.asyncProperty(keyRest, async (rest) => {
        const run = await sendAndWait(`agent:main:${rest}`.slice(0, 512), "x");
        const r = await call("GET", `/v1/runs/${run.runId}/events`);
        expect(r.status).toBe(200);
      }),
      { seed: SEED, numRuns: 12 },
    );
  });

  it("any attachment mimeType: a media type is stored and served as a download, anything else is a 400 naming it", {
    timeout: 120_000,
  }, async () => {
    setConfigOverride({
      agents: { list: [{ id: "main", default: true }] },
      tools: { sessions_spawn: { attachments: { enabled: true } } },
    });
    const mime = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.stringMatching(/^[a-z]{1,10}\/[a-z0-9.+-]{1,20}(; ?[a-z]{1,8}=[a-z0-9-]{1,8})?$/),
      fc.constantFrom("text/html", "image/svg+xml", "text/plain\r\nX-Evil: 1", "a/b\nc", 'text/plain; charset="x\\"'),
    );
    await fc.assert(
      fc.asyncProperty(mime, async (mimeType) => {
        const r = await call("POST", "/tools/invoke", {
          tool: "sessions_spawn",
          args: { task: "t", attachments: [{ name: "f.bin", content: "x", mimeType }] },
          sessionKey: `agent:main:mime-${crypto.randomUUID().slice(0, 8)}`,
        });
        const trimmed = mimeType.trim();
        if (trimmed.length <= 255 && MEDIA_TYPE.test(trimmed)) {
          expect(r.status).toBe(200);
          const child = r.json.result.details.childSessionKey;
          const file = await call("GET", `/v1/sessions/${enc(child)}/attachments/f.bin`);
          expect(file.status).toBe(200);
          expect(file.headers.get("content-type")).toBe(trimmed);
          expect(file.headers.get("content-disposition")).toMatch(/^attachment; /);
          expect(file.headers.get("x-content-type-options")).toBe("nosniff");
        } else {
          expect(r.status).toBe(400);
          expect(r.json.error.message).toMatch(/^attachments\.0\.mimeType: /);
        }
      }),
      { seed: SEED, numRuns: 40 },
    );
  });

  it("CONFIG timeouts of any finite size keep the gateway up and within their documented range", async () => {
    const num = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constant(1e300));
    await fc.assert(
      fc.asyncProperty(num, num, num, async (timeoutSeconds, runTimeoutSeconds, announceTimeoutMs) => {
        setConfigOverride({
          agents: {
            defaults: { timeoutSeconds, subagents: { runTimeoutSeconds, announceTimeoutMs } },
            list: [{ id: "main", default: true }],
          },
        });
        const r = await call("GET", "/v1/config");
        expect(r.status).toBe(200);
        const d = r.json.config.agents.defaults;
        // 0 is OpenClaw's "no deadline" (docs/contract.md): a run without one is ended by its lease and the sweeper.
        expect(d.timeoutSeconds).toBeGreaterThanOrEqual(0);
        expect(d.timeoutSeconds).toBeLessThanOrEqual(2_592_000);
        expect(d.subagents.runTimeoutSeconds).toBeLessThanOrEqual(2_592_000);
        expect(d.subagents.announceTimeoutMs).toBeLessThanOrEqual(2_147_000_000);
      }),
      { seed: SEED, numRuns: 60 },
    );
  });

  it("a token in a webhook URL's path never shows in GET /v1/config or in a log line", async () => {
    const token = fc.stringMatching(/^[A-Za-z0-9_-]{16,64}$/).filter((t) => /[0-9]/.test(t) && /[A-Za-z]/.test(t));
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void lines.push(a.map(String).join(" ")));
    await fc.assert(
      fc.asyncProperty(token, fc.constantFrom("services/T01/B02", "api/webhooks/1234", "hook"), async (t, path) => {
        const url = `https://hooks.example.com/${path}/${t}`;
        setConfigOverride({
          agents: { list: [{ id: "main", default: true }] },
          channels: { slack: { webhookUrl: url } },
        });
        expect(JSON.stringify((await call("GET", "/v1/config")).json)).not.toContain(t);
        lines.length = 0;
        logEvent("warn", "delivery_failed", { error: `POST ${url} answered 500` });
        expect(lines.join("\n")).not.toContain(t);
      }),
      { seed: SEED, numRuns: 40 },
    );
  });

  it("the same idempotency key from two principals is two messages; from one principal, one", {
    timeout: 60_000,
  }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 256 }), async (idem) => {
        const key = `agent:main:idem-${crypto.randomUUID().slice(0, 8)}`;
        const send = (token: string) =>
          call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "m", idempotencyKey: idem }, { token });
        const a = await send(MAIN_TOKEN);
        const b = await send(GATEWAY);
        expect(a.status).toBe(202);
        expect(b.json.runId).not.toBe(a.json.runId);
        expect((await send(GATEWAY)).json.runId).toBe(b.json.runId);
      }),
      { seed: SEED, numRuns: 20 },
    );
  });
});

import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { signWebhookBody, verifyWebhookSignature } from "../../src/channels/signed-webhook";
import {
  classifyHttpStatus,
  MAX_DELIVERY_ATTEMPTS,
  nextRetryDelayMs,
  type OutboundPayload,
  postWebhook,
} from "../../src/channels/webhook";

const payload: OutboundPayload = {
  channel: "discord",
  to: "channel:123",
  accountId: "work",
  threadId: "99",
  message: "hello ✓",
  sessionKey: "agent:main:discord:channel:123",
  kind: "subagent_announce",
  idempotencyKey: "announce:v1:agent:main:subagent:abc:run-1",
};

/** Independent HMAC so the test does not just re-run the code under test. */
async function referenceHmacHex(secret: string, message: string): Promise<string> {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(message)));
  return [...mac].map((b) => b.toString(16).padStart(2, "0")).join("");
}

interface Captured {
  url: string;
  init: RequestInit;
  headers: Headers;
  body: string;
}

/** A fake fetch that records each request and answers with the given responses / throws in turn. */
function fakeFetch(...answers: (Response | Error | (() => Promise<Response>))[]) {
  const calls: Captured[] = [];
  const impl = (async (input: RequestInfo | URL, init?: RequestInit) => {
    calls.push({ url: String(input), init: init!, headers: new Headers(init!.headers), body: String(init!.body) });
    const a = answers[Math.min(calls.length - 1, answers.length - 1)];
    if (a instanceof Error) throw a;
    if (typeof a === "function") return a();
    return a.clone();
  }) as typeof fetch;
  return { impl, calls };
}

describe("signatures", () => {
  it("signWebhookBody = sha256=<HMAC(secret, timestamp.body)> computed independently", async () => {
    const body = JSON.stringify(payload);
    const sig = await signWebhookBody("s3cret", "1700000000000", body);
    expect(sig).toBe(`sha256=${await referenceHmacHex("s3cret", `1700000000000.${body}`)}`);
    expect(sig).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it("the timestamp is covered by the MAC", async () => {
    expect(await signWebhookBody("k", "1", "{}")).not.toBe(await signWebhookBody("k", "2", "{}"));
  });

  it("verify accepts the right signature (any hex case) and refuses tampering", async () => {
    const sig = await signWebhookBody("k", "1700000000000", '{"a":1}');
    expect(await verifyWebhookSignature("k", "1700000000000", '{"a":1}', sig)).toBe(true);
    expect(await verifyWebhookSignature("k", "1700000000000", '{"a":1}', `sha256=${sig.slice(7).toUpperCase()}`)).toBe(
      true,
    );
    expect(await verifyWebhookSignature("k", "1700000000000", '{"a":2}', sig)).toBe(false); // body changed
    expect(await verifyWebhookSignature("k", "1700000000001", '{"a":1}', sig)).toBe(false); // timestamp changed
    expect(await verifyWebhookSignature("other", "1700000000000", '{"a":1}', sig)).toBe(false); // wrong secret
  });

  it("verify refuses malformed headers without throwing", async () => {
    const sig = await signWebhookBody("k", "1", "b");
    for (const bad of [
      null,
      undefined,
      "",
      sig.slice(7),
      `sha1=${sig.slice(7)}`,
      `${sig}00`,
      `sha256=zz${sig.slice(9)}`,
    ]) {
      expect(await verifyWebhookSignature("k", "1", "b", bad)).toBe(false);
    }
    expect(await verifyWebhookSignature("", "1", "b", sig)).toBe(false);
  });

  it("verify with toleranceMs refuses stale timestamps (replay window)", async () => {
    const sig = await signWebhookBody("k", "1000000", "b");
    expect(await verifyWebhookSignature("k", "1000000", "b", sig, { toleranceMs: 300_000, now: 1_200_000 })).toBe(true);
    expect(await verifyWebhookSignature("k", "1000000", "b", sig, { toleranceMs: 300_000, now: 1_400_000 })).toBe(
      false,
    );
  });
});

describe("postWebhook", () => {
  it("POSTs the JSON body with idempotency, timestamp and a verifiable signature", async () => {
    const f = fakeFetch(new Response("ok", { status: 200 }));
    const r = await postWebhook({
      url: "https://hooks.example/in",
      secret: "k",
      payload,
      now: () => 1_700_000_000_123,
      fetchImpl: f.impl,
    });
    expect(r).toEqual({ outcome: "delivered", status: 200 });
    expect(f.calls).toHaveLength(1);
    const c = f.calls[0];
    expect(c.url).toBe("https://hooks.example/in");
    expect(c.init.method).toBe("POST");
    expect(c.headers.get("content-type")).toBe("application/json");
    expect(c.headers.get("idempotency-key")).toBe(payload.idempotencyKey);
    expect(c.headers.get("x-switchboard-timestamp")).toBe("1700000000123");
    expect(JSON.parse(c.body)).toEqual(payload);
    // The receiver's view: signature over exactly the bytes it received.
    expect(c.headers.get("x-switchboard-signature")).toBe(
      `sha256=${await referenceHmacHex("k", `1700000000123.${c.body}`)}`,
    );
    expect(await verifyWebhookSignature("k", "1700000000123", c.body, c.headers.get("x-switchboard-signature"))).toBe(
      true,
    );
  });

  it("omits the signature header without a secret", async () => {
    const f = fakeFetch(new Response(null, { status: 204 }));
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r).toEqual({ outcome: "delivered", status: 204 });
    expect(f.calls[0].headers.has("x-switchboard-signature")).toBe(false);
    expect(f.calls[0].headers.get("idempotency-key")).toBe(payload.idempotencyKey);
  });

  it("retries carry the same Idempotency-Key (receivers de-duplicate on it)", async () => {
    const f = fakeFetch(new Response("down", { status: 503 }), new Response("ok", { status: 200 }));
    let t = 1000;
    const first = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl, now: () => t });
    t = 6000;
    const second = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl, now: () => t });
    expect([first.outcome, second.outcome]).toEqual(["retry", "delivered"]);
    expect(f.calls[0].headers.get("idempotency-key")).toBe(f.calls[1].headers.get("idempotency-key"));
    expect(f.calls[0].headers.get("x-switchboard-timestamp")).toBe("1000");
    expect(f.calls[1].headers.get("x-switchboard-timestamp")).toBe("6000");
  });

  it.each([200, 201, 202, 204])("HTTP %i → delivered", async (status) => {
    const f = fakeFetch(new Response(status === 204 ? null : "x", { status }));
    expect((await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl })).outcome).toBe("delivered");
  });

  it.each([500, 502, 503, 429])("HTTP %i → retry with a short error", async (status) => {
    const f = fakeFetch(new Response("try again later", { status }));
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r).toEqual({ outcome: "retry", status, error: `HTTP ${status}: try again later` });
  });

  it.each([400, 401, 404, 410, 301])("HTTP %i → dead", async (status) => {
    const f = fakeFetch(
      new Response("", { status, headers: status === 301 ? { location: "https://elsewhere/" } : {} }),
    );
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r).toEqual({ outcome: "dead", status, error: `HTTP ${status}` });
  });

  it("does not follow redirects (a signed body must not be forwarded)", async () => {
    const f = fakeFetch(new Response("ok"));
    await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(f.calls[0].init.redirect).toBe("manual");
  });

  it("the error body is cut to 200 chars", async () => {
    const f = fakeFetch(new Response("x".repeat(5000), { status: 500 }));
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r.error).toBe(`HTTP 500: ${"x".repeat(200)}`);
  });

  it("an endless error body is read only up to a few KB (bounded)", async () => {
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(ctrl) {
        pulled += 1024;
        ctrl.enqueue(new Uint8Array(1024).fill(121));
      },
    });
    const f = fakeFetch(new Response(endless, { status: 503 }));
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r).toEqual({ outcome: "retry", status: 503, error: `HTTP 503: ${"y".repeat(200)}` });
    expect(pulled).toBeLessThanOrEqual(4096 + 2 * 1024);
  });

  it("a thrown network error → retry, never a throw", async () => {
    const f = fakeFetch(new TypeError("connection refused"));
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(r).toEqual({ outcome: "retry", error: "network error: connection refused" });
  });

  it("a fetch that never answers (and ignores the signal) → retry after the timeout", async () => {
    const f = fakeFetch(() => new Promise<Response>(() => {}));
    const started = Date.now();
    const r = await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl, timeoutMs: 50 });
    expect(r).toEqual({ outcome: "retry", error: "timeout after 50ms" });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(f.calls[0].init.signal).toBeInstanceOf(AbortSignal);
  });

  it("an invalid or non-http URL is dead without calling fetch", async () => {
    const f = fakeFetch(new Response("ok"));
    expect((await postWebhook({ url: "not a url", payload, fetchImpl: f.impl })).outcome).toBe("dead");
    expect((await postWebhook({ url: "ftp://h.example/", payload, fetchImpl: f.impl })).outcome).toBe("dead");
    expect(f.calls).toHaveLength(0);
  });
});

describe("classifyHttpStatus", () => {
  it("maps the edges of each range", () => {
    expect([199, 200, 299, 300, 399, 400, 428, 429, 430, 499, 500, 599].map(classifyHttpStatus)).toEqual([
      "dead",
      "delivered",
      "delivered",
      "dead",
      "dead",
      "dead",
      "dead",
      "retry",
      "dead",
      "dead",
      "retry",
      "retry",
    ]);
  });
});

describe("retry schedule", () => {
  it("doubles from 5 s and caps at 10 minutes", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map(nextRetryDelayMs)).toEqual([
      5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000,
    ]);
    expect(nextRetryDelayMs(1000)).toBe(600_000);
    expect(nextRetryDelayMs(Infinity)).toBe(600_000);
  });
  it("nonsense attempts fall back to the first delay", () => {
    expect(nextRetryDelayMs(0)).toBe(5_000);
    expect(nextRetryDelayMs(-3)).toBe(5_000);
    expect(nextRetryDelayMs(NaN)).toBe(5_000);
  });
  it("8 attempts in all (≈10.6 min of retrying before dead-letter)", () => {
    expect(MAX_DELIVERY_ATTEMPTS).toBe(8);
    const waited = Array.from({ length: MAX_DELIVERY_ATTEMPTS - 1 }, (_, i) => nextRetryDelayMs(i + 1)).reduce(
      (a, b) => a + b,
    );
    expect(waited).toBe(635_000);
  });
});

/** What a receiver using the `standardwebhooks` library sees: verify() returns the payload or throws. */
function standardHeaders(h: Headers): Record<string, string> {
  return {
    "webhook-id": h.get("webhook-id") ?? "",
    "webhook-timestamp": h.get("webhook-timestamp") ?? "",
    "webhook-signature": h.get("webhook-signature") ?? "",
  };
}

describe("Standard Webhooks headers (verified with the standardwebhooks package)", () => {
  const utf8 = (s: string) => new TextEncoder().encode(s);

  it("a plain secret signs with its UTF-8 bytes: the library's raw-key verifier accepts it, tampering and other keys are refused", async () => {
    const secret = "plain-sécret";
    const f = fakeFetch(new Response("ok"));
    await postWebhook({ url: "https://h.example/", secret, payload, fetchImpl: f.impl });
    const c = f.calls[0];
    expect(c.headers.get("webhook-id")).toBe(payload.idempotencyKey);
    expect(c.headers.get("webhook-timestamp")).toMatch(/^\d{10}$/);
    expect(c.headers.get("webhook-signature")).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(utf8(secret), { format: "raw" }).verify(c.body, standardHeaders(c.headers))).toEqual(payload);
    expect(() =>
      new Webhook(utf8(secret), { format: "raw" }).verify(c.body.replace("hello", "hullo"), standardHeaders(c.headers)),
    ).toThrow();
    expect(() => new Webhook(utf8("other"), { format: "raw" }).verify(c.body, standardHeaders(c.headers))).toThrow();
    // The deprecated headers still travel alongside and still verify.
    expect(
      await verifyWebhookSignature(
        secret,
        c.headers.get("x-switchboard-timestamp")!,
        c.body,
        c.headers.get("x-switchboard-signature"),
      ),
    ).toBe(true);
    expect(Number(c.headers.get("x-switchboard-timestamp")) / 1000).toBeCloseTo(
      Number(c.headers.get("webhook-timestamp")),
      -1,
    );
  });

  it("a whsec_<base64> secret signs with its decoded bytes, as the spec's secret format says", async () => {
    const keyBytes = crypto.getRandomValues(new Uint8Array(24));
    const secret = `whsec_${btoa(String.fromCharCode(...keyBytes))}`;
    const f = fakeFetch(new Response("ok"));
    await postWebhook({ url: "https://h.example/", secret, payload, fetchImpl: f.impl });
    const c = f.calls[0];
    expect(new Webhook(secret).verify(c.body, standardHeaders(c.headers))).toEqual(payload);
    // Not the UTF-8 bytes of the whole string.
    expect(() => new Webhook(utf8(secret), { format: "raw" }).verify(c.body, standardHeaders(c.headers))).toThrow();
  });

  it("webhook-id is the idempotency key on every retry of one delivery; each attempt is signed at its own time", async () => {
    const f = fakeFetch(new Response("down", { status: 503 }), new Response("ok"));
    let t = 1_700_000_000_000;
    await postWebhook({ url: "https://h.example/", secret: "k", payload, fetchImpl: f.impl, now: () => t });
    t += 5_000;
    await postWebhook({ url: "https://h.example/", secret: "k", payload, fetchImpl: f.impl, now: () => t });
    expect(f.calls.map((c) => c.headers.get("webhook-id"))).toEqual([payload.idempotencyKey, payload.idempotencyKey]);
    expect(f.calls.map((c) => c.headers.get("webhook-timestamp"))).toEqual(["1700000000", "1700000005"]);
    expect(f.calls[0].headers.get("webhook-signature")).not.toBe(f.calls[1].headers.get("webhook-signature"));
  });

  it("without a secret the ids and timestamp go out unsigned", async () => {
    const f = fakeFetch(new Response("ok"));
    await postWebhook({ url: "https://h.example/", payload, fetchImpl: f.impl });
    expect(f.calls[0].headers.get("webhook-id")).toBe(payload.idempotencyKey);
    expect(f.calls[0].headers.get("webhook-timestamp")).toMatch(/^\d{10}$/);
    expect(f.calls[0].headers.has("webhook-signature")).toBe(false);
  });

  it("a whsec_ secret that is not base64 is a configuration error: the delivery is dead, nothing is sent", async () => {
    const f = fakeFetch(new Response("ok"));
    const r = await postWebhook({ url: "https://h.example/", secret: "whsec_not base64!", payload, fetchImpl: f.impl });
    expect(r).toEqual({
      outcome: "dead",
      error: "cannot build request: webhook secret starts with whsec_ but the rest is not base64",
    });
    expect(f.calls).toHaveLength(0);
  });
});

import { runInDurableObject } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { queueDelivery } from "../../src/channels/outbox";
import { verifyWebhookSignature } from "../../src/channels/signed-webhook";
import { MAX_DELIVERY_ATTEMPTS, nextRetryDelayMs } from "../../src/channels/webhook";
import { setConfigOverride } from "../../src/config/load";
import { sessionExtensions } from "../../src/extensions";
import type { SessionObject } from "../../src/session/session-object";
import { advance, call, enc, sendAndWait, sessionStub } from "../helpers/http";
import { crash } from "../helpers/restart";
import { deliveriesOf, installFakes, until } from "../helpers/scripted";

const HOOK = "https://hooks.test/telegram";
function config(channels: Record<string, unknown> = { telegram: { outbound: { url: HOOK, secret: "tg-secret" } } }) {
  setConfigOverride({ agents: { list: [{ id: "main", default: true }] }, channels });
}

const standardReceiver = (secret: string) => new Webhook(new TextEncoder().encode(secret), { format: "raw" });

let n = 0;
const nextKey = () => `agent:main:telegram:direct:user-${++n}`;

/** Dead reply deliveries as the extensions' onDeliveryDead hooks are told of them. */
const deadSeen: { key: string; delivery: any }[] = [];
beforeEach(() => {
  const tell = sessionExtensions.deliveryDead.bind(sessionExtensions);
  vi.spyOn(sessionExtensions, "deliveryDead").mockImplementation(async (host, delivery) => {
    if (delivery.kind === "reply") deadSeen.push({ key: host.key, delivery });
    return tell(host, delivery);
  });
});

async function inbound(key: string, message: string, extra: Record<string, unknown> = {}) {
  return sendAndWait(key, message, {
    channel: "telegram",
    to: "chat-42",
    accountId: "bot-1",
    threadId: 7,
    deliver: true,
    ...extra,
  });
}

describe("outbox", () => {
  it("a reply to an inbound `deliver: true` message is POSTed to the channel webhook, signed, with the documented body", async () => {
    config();
    const fakes = installFakes(() => "unused");
    const key = nextKey();
    const run = await inbound(key, "hello out there");
    expect(run).toMatchObject({ status: "ok", reply: "hello out there" });
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    const hook = fakes.hooks[0];
    expect(hook.url).toBe(HOOK);
    expect(hook.body).toEqual({
      channel: "telegram",
      to: "chat-42",
      accountId: "bot-1",
      threadId: "7",
      message: "hello out there",
      sessionKey: key,
      kind: "reply",
      idempotencyKey: `reply:${run.runId}`,
    });
    expect(hook.headers["content-type"]).toBe("application/json");
    expect(hook.headers["idempotency-key"]).toBe(`reply:${run.runId}`);
    const ts = hook.headers["x-switchboard-timestamp"];
    expect(await verifyWebhookSignature("tg-secret", ts, hook.rawBody, hook.headers["x-switchboard-signature"])).toBe(
      true,
    );
    // A tampered body or the wrong secret does not verify.
    expect(
      await verifyWebhookSignature(
        "tg-secret",
        ts,
        hook.rawBody.replace("hello", "hullo"),
        hook.headers["x-switchboard-signature"],
      ),
    ).toBe(false);
    expect(await verifyWebhookSignature("other", ts, hook.rawBody, hook.headers["x-switchboard-signature"])).toBe(
      false,
    );
    // Standard Webhooks: a receiver using the standardwebhooks library (raw key = the secret's UTF-8 bytes) gets the payload.
    expect(hook.headers["webhook-id"]).toBe(`reply:${run.runId}`);
    expect(standardReceiver("tg-secret").verify(hook.rawBody, hook.headers)).toEqual(hook.body);
    expect(() => standardReceiver("other").verify(hook.rawBody, hook.headers)).toThrow();

    const list = await call("GET", `/v1/sessions/${enc(key)}/deliveries?status=delivered`);
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ sessionKey: key, count: 1 });
    expect(list.json.deliveries[0]).toMatchObject({
      kind: "reply",
      channel: "telegram",
      status: "delivered",
      attempts: 1,
      lastError: null,
      deliveredAt: expect.any(Number),
    });
  });

  it("without a webhookSecret the request is not signed", async () => {
    config({ telegram: { outbound: { url: HOOK } } });
    const fakes = installFakes(() => "unused");
    await inbound(nextKey(), "plain");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    expect(fakes.hooks[0].headers["x-switchboard-signature"]).toBeUndefined();
    expect(fakes.hooks[0].headers["x-switchboard-timestamp"]).toMatch(/^\d+$/);
  });

  it("without `deliver: true` nothing is delivered", async () => {
    config();
    const fakes = installFakes(() => "unused");
    const key = nextKey();
    await inbound(key, "keep it here", { deliver: false });
    expect(fakes.hooks).toHaveLength(0);
    expect(await deliveriesOf(key)).toEqual([]);
  });

  it("webhook down then up: retried by the alarm with backoff, delivered once it is back, same idempotency key", async () => {
    config();
    const fakes = installFakes(() => "unused");
    let down = true;
    fakes.hookStatus = () => (down ? 503 : 200);
    const key = nextKey();
    await inbound(key, "are you there");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    const pending = await until(async () => {
      const p = await deliveriesOf(key, "pending");
      expect(p[0]?.lastError).toBe("HTTP 503");
      return p;
    });
    expect(pending[0].attempts).toBe(1);

    // Not yet due: nothing happens before the backoff has passed.
    await advance(key, nextRetryDelayMs(1) - 1_000);
    expect(fakes.hooks).toHaveLength(1);
    await advance(key, 1_000);
    expect(fakes.hooks).toHaveLength(2);
    expect((await deliveriesOf(key, "pending"))[0].attempts).toBe(2);

    down = false;
    await advance(key, nextRetryDelayMs(2));
    expect(fakes.hooks).toHaveLength(3);
    expect(new Set(fakes.hooks.map((h) => h.headers["idempotency-key"])).size).toBe(1);
    // webhook-id is the same delivery's id on every attempt; every attempt verifies on its own.
    expect(fakes.hooks.map((h) => h.headers["webhook-id"])).toEqual(
      Array(3).fill(fakes.hooks[0].headers["idempotency-key"]),
    );
    for (const h of fakes.hooks) expect(standardReceiver("tg-secret").verify(h.rawBody, h.headers)).toEqual(h.body);
    const delivered = await deliveriesOf(key, "delivered");
    expect(delivered[0]).toMatchObject({ attempts: 3, lastError: null });
    // Delivered means done: later alarms never post it again.
    await advance(key, 60 * 60_000);
    expect(fakes.hooks).toHaveLength(3);
  });

  it("dead letter after the last attempt; onDeliveryDead handlers are told once; an operator can re-queue it", async () => {
    config();
    const fakes = installFakes(() => "unused");
    fakes.hookStatus = () => 500;
    const key = nextKey();
    await inbound(key, "doomed");
    await until(async () => expect(fakes.hooks).toHaveLength(1));
    await until(async () => expect((await deliveriesOf(key, "pending"))[0]?.attempts).toBe(1));
    for (let i = 1; i < MAX_DELIVERY_ATTEMPTS; i++) await advance(key, nextRetryDelayMs(i));
    expect(fakes.hooks).toHaveLength(MAX_DELIVERY_ATTEMPTS);
    const dead = await until(async () => {
      const d = await deliveriesOf(key, "dead");
      expect(d).toHaveLength(1);
      return d;
    });
    expect(dead[0]).toMatchObject({ status: "dead", attempts: MAX_DELIVERY_ATTEMPTS, lastError: "HTTP 500" });
    await until(async () => expect(deadSeen.filter((d) => d.key === key)).toHaveLength(1));
    expect(deadSeen.find((d) => d.key === key)!.delivery).toMatchObject({
      id: dead[0].id,
      message: "doomed",
      error: "HTTP 500",
      route: { channel: "telegram", to: "chat-42" },
    });
    await advance(key, 60 * 60_000);
    expect(fakes.hooks).toHaveLength(MAX_DELIVERY_ATTEMPTS);

    // Visible over /v1, and re-queueable once the receiver is fixed.
    const listed = await call("GET", `/v1/sessions/${enc(key)}/deliveries?status=dead`);
    expect(listed.json.deliveries.map((d: any) => d.id)).toEqual([dead[0].id]);
    fakes.hookStatus = () => 200;
    const retried = await call("POST", `/v1/sessions/${enc(key)}/deliveries/${dead[0].id}/retry`);
    expect(retried.status).toBe(200);
    await until(async () => expect(await deliveriesOf(key, "delivered")).toHaveLength(1));
    expect(fakes.hooks.at(-1)!.headers["idempotency-key"]).toBe(dead[0].idempotencyKey);
  });

  it("a permanent 4xx is a dead letter at once (no retries)", async () => {
    config();
    const fakes = installFakes(() => "unused");
    fakes.hookStatus = () => 404;
    const key = nextKey();
    await inbound(key, "wrong door");
    const dead = await until(async () => {
      const d = await deliveriesOf(key, "dead");
      expect(d).toHaveLength(1);
      return d;
    });
    expect(dead[0]).toMatchObject({ attempts: 1, lastError: "HTTP 404" });
    await advance(key, 60 * 60_000);
    expect(fakes.hooks).toHaveLength(1);
  });

  it("a channel with no configured webhook is a clear dead letter, not a silent drop", async () => {
    config({});
    const fakes = installFakes(() => "unused");
    const key = nextKey();
    await inbound(key, "nowhere to go");
    const dead = await until(async () => {
      const d = await deliveriesOf(key, "dead");
      expect(d).toHaveLength(1);
      return d;
    });
    expect(dead[0]).toMatchObject({
      channel: "telegram",
      attempts: 0,
      lastError: 'No webhook configured for channel "telegram" (set channels.telegram.outbound.url)',
    });
    expect(fakes.hooks).toHaveLength(0);
    await until(async () => expect(deadSeen.filter((d) => d.key === key)).toHaveLength(1));
  });

  it("queueDelivery with the same idempotency key twice returns the existing row: one delivery", async () => {
    config();
    const fakes = installFakes(() => "unused");
    const key = nextKey();
    await inbound(key, "first", { deliver: false });
    const [a, b] = await runInDurableObject(sessionStub(key), async (obj: SessionObject) => {
      const d = {
        kind: "announce" as const,
        route: { channel: "telegram", to: "chat-42" },
        message: "once",
        idempotencyKey: "dup-key",
      };
      const first = obj.storage.transactionSync(() => queueDelivery(obj, d));
      const second = obj.storage.transactionSync(() => queueDelivery(obj, d));
      await obj.timers.arm();
      return [first, second];
    });
    expect(a.status).toBe("pending");
    expect(b).toEqual(a);
    await advance(key, 0);
    await until(async () => expect(await deliveriesOf(key, "delivered")).toHaveLength(1));
    expect(fakes.hooks.filter((h) => h.body.idempotencyKey === "dup-key")).toHaveLength(1);
  });

  it("an eviction during a POST: the attempt's lease expires and the same delivery is retried with the same key", async () => {
    config();
    const fakes = installFakes(() => "unused");
    const key = nextKey();
    const realFetch = (globalThis.fetch as any).getMockImplementation();
    let hang = true;
    vi.mocked(globalThis.fetch).mockImplementation(async (input: any, init?: any) => {
      const url = typeof input === "string" ? input : input.url;
      if (url.startsWith("https://hooks.test") && hang) {
        hang = false;
        return new Promise<Response>(() => {});
      }
      return realFetch(input, init);
    });
    await inbound(key, "survive me");
    await until(async () => expect(hang).toBe(false));
    // The delivery's POST is in flight when the instance ends.
    await crash(sessionStub(key));
    expect((await deliveriesOf(key, "pending"))[0]).toMatchObject({ attempts: 1 });
    await advance(key, 60_000);
    await until(async () => expect(await deliveriesOf(key, "delivered")).toHaveLength(1));
    expect(fakes.hooks).toHaveLength(1);
    expect((await deliveriesOf(key, "delivered"))[0]).toMatchObject({ attempts: 2 });
  });

  it("GET /v1/sessions/{key}/deliveries validates status and answers an empty list for an unknown session", async () => {
    config();
    const bad = await call("GET", `/v1/sessions/${enc(nextKey())}/deliveries?status=lost`);
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({
      ok: false,
      error: { type: "invalid_request", message: "status: expected one of pending, delivered, blocked, dead" },
    });
    const empty = await call("GET", `/v1/sessions/${enc(nextKey())}/deliveries`);
    expect(empty.json).toMatchObject({ count: 0, deliveries: [] });
    const nf = await call("POST", `/v1/sessions/${enc(nextKey())}/deliveries/nope/retry`);
    expect(nf.status).toBe(404);
  });
});

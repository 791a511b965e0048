/**
 * Headers of every signed webhook Switchboard sends: channel deliveries (src/channels/webhook.ts) and
 * webhook-runtime runs (src/runners/webhook-runner.ts). Two signature schemes travel side by side
 * (docs/webhooks.md):
 *
 *  - Standard Webhooks (https://www.standardwebhooks.com): `webhook-id`, `webhook-timestamp` (seconds),
 *    `webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>`.
 *  - Deprecated, kept for existing receivers: `X-Switchboard-Timestamp` (ms) and
 *    `X-Switchboard-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`.
 *
 * The id is the caller's idempotency key, identical on every retry of one delivery, so a receiver
 * de-duplicates on `webhook-id` (or the `Idempotency-Key` header carrying the same value).
 */

const encoder = new TextEncoder();
const STANDARD_SECRET_PREFIX = "whsec_";

function toHex(bytes: ArrayBuffer): string {
  let hex = "";
  for (const b of new Uint8Array(bytes)) hex += b.toString(16).padStart(2, "0");
  return hex;
}

function toBase64(bytes: ArrayBuffer): string {
  let bin = "";
  for (const b of new Uint8Array(bytes)) bin += String.fromCharCode(b);
  return btoa(bin);
}

function hmacKey(raw: Uint8Array, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, [usage]);
}

/**
 * The Standard Webhooks key of a configured secret: `whsec_<base64>` is the spec's format and
 * means the base64-decoded bytes; any other secret is used as its UTF-8 bytes (so an existing
 * secret keeps working unchanged; a receiver passes those bytes to its library's raw-key form).
 * Throws for a `whsec_` secret whose rest is not base64: that is a configuration error.
 */
export function standardWebhookKey(secret: string): Uint8Array {
  if (!secret.startsWith(STANDARD_SECRET_PREFIX)) return encoder.encode(secret);
  const b64 = secret.slice(STANDARD_SECRET_PREFIX.length);
  let bin: string;
  try {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error("not base64");
    bin = atob(b64);
  } catch {
    throw new Error("webhook secret starts with whsec_ but the rest is not base64");
  }
  return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
}

/** `v1,<base64 HMAC-SHA256(key, id.timestampSeconds.body)>` — the Standard Webhooks signature. */
export async function standardWebhookSignature(
  secret: string,
  id: string,
  timestampSeconds: string,
  rawBody: string,
): Promise<string> {
  const key = await hmacKey(standardWebhookKey(secret), "sign");
  const mac = await crypto.subtle.sign("HMAC", key, encoder.encode(`${id}.${timestampSeconds}.${rawBody}`));
  return `v1,${toBase64(mac)}`;
}

/**
 * Deprecated scheme: `sha256=<hex HMAC-SHA256(secret, timestamp + "." + rawBody)>`. The timestamp is
 * inside the MAC so a captured request cannot be replayed later with a fresh timestamp. Throws only
 * for an empty secret (Web Crypto refuses zero-length HMAC keys); callers treat "" as "no secret".
 */
export async function signWebhookBody(secret: string, timestamp: string, rawBody: string): Promise<string> {
  const key = await hmacKey(encoder.encode(secret), "sign");
  const mac = await crypto.subtle.sign("HMAC", key, encoder.encode(`${timestamp}.${rawBody}`));
  return `sha256=${toHex(mac)}`;
}

/**
 * Receiver-side check of the deprecated scheme. Uses `crypto.subtle.verify`, which compares MACs in
 * constant time. With `toleranceMs`, a timestamp further than that from `now` (ms since epoch) is
 * refused too, which is what makes replays useless. Never throws.
 */
export async function verifyWebhookSignature(
  secret: string,
  timestamp: string,
  rawBody: string,
  signatureHeader: string | null | undefined,
  opts: { toleranceMs?: number; now?: number } = {},
): Promise<boolean> {
  try {
    if (!secret || typeof signatureHeader !== "string") return false;
    const m = /^sha256=([0-9a-fA-F]{64})$/.exec(signatureHeader.trim());
    if (!m) return false;
    if (opts.toleranceMs !== undefined) {
      if (!/^\d{1,16}$/.test(timestamp)) return false;
      const skew = Math.abs((opts.now ?? Date.now()) - Number(timestamp));
      if (skew > opts.toleranceMs) return false;
    }
    const hex = m[1];
    const mac = new Uint8Array(32);
    for (let i = 0; i < 32; i++) mac[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
    const key = await hmacKey(encoder.encode(secret), "verify");
    return await crypto.subtle.verify("HMAC", key, mac, encoder.encode(`${timestamp}.${rawBody}`));
  } catch {
    return false;
  }
}

/**
 * Every header of one signed JSON POST. `id` is the delivery's idempotency key (stable across its
 * retries); `nowMs` is the attempt's time. Without a secret (or with "") nothing is signed: the ids
 * and timestamps still go out so receivers can de-duplicate. Throws for an unusable secret.
 */
export async function signedWebhookHeaders(input: {
  id: string;
  rawBody: string;
  secret?: string;
  nowMs: number;
}): Promise<Record<string, string>> {
  const ms = String(Math.floor(input.nowMs));
  const seconds = String(Math.floor(input.nowMs / 1000));
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "Idempotency-Key": input.id,
    "webhook-id": input.id,
    "webhook-timestamp": seconds,
    "X-Switchboard-Timestamp": ms,
  };
  if (input.secret) {
    headers["webhook-signature"] = await standardWebhookSignature(input.secret, input.id, seconds, input.rawBody);
    headers["X-Switchboard-Signature"] = await signWebhookBody(input.secret, ms, input.rawBody);
  }
  return headers;
}

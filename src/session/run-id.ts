/**
 * Run ids carry the key of the session that owns the run, so `GET /v1/runs/{id}` reaches the right
 * object with no lookup table (one less write per run, nothing to keep consistent).
 * Format: `<uuid>.<base64url(canonicalKey)>`.
 */
export function newRunId(sessionKey: string): string {
  return `${crypto.randomUUID()}.${b64urlEncode(sessionKey)}`;
}

export function sessionKeyOfRun(runId: string): string | null {
  const dot = runId.indexOf(".");
  if (dot !== 36 || runId.length > 1024) return null;
  try {
    return b64urlDecode(runId.slice(dot + 1));
  } catch {
    return null;
  }
}

function b64urlEncode(s: string): string {
  const bytes = new TextEncoder().encode(s);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function b64urlDecode(s: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(s)) throw new Error("bad run id");
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
    Uint8Array.from(bin, (c) => c.charCodeAt(0)),
  );
}

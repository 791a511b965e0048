/**
 * Read at most `maxBytes` of a response body as UTF-8: an outside server cannot make us buffer an
 * unbounded reply. Returns null when the body is larger (the caller treats that as a failure), and
 * cancels the rest of the stream either way.
 */
export async function readBoundedText(res: Response, maxBytes: number): Promise<string | null> {
  const body = res.body;
  if (!body) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) return null;
      chunks.push(value);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

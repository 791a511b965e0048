import { parseCanonical } from "../keys";
import { type IndexEntry, indexEntryOf } from "../registry/row";
import { TRANSCRIPT_CHUNK_BYTES } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import { writeHistoryPages } from "./archive-pages";
import { servedMediaType } from "./attachments";

/**
 * Cold storage for archived sub-agents (test/spawn/subagent-archive.test.ts): before a child's storage is cleared,
 * its transcript (the same JSONL as `GET /v1/sessions/{key}/transcript.jsonl`) goes to the optional
 * R2 bucket `ARCHIVE`, and its attachments too when `retainOnSessionKeep` asks to keep them.
 * Without the binding nothing is exported and the child is kept (subagent-lifecycle.ts). The transcript is streamed in byte-budgeted chunks into
 * a bounded buffer (one R2 part), so a long-lived thread-bound child archives in constant memory.
 */

/** The index entry an archived session leaves: not listed, resolvable, marked `archived: true`. */
export function archivedEntryOf(host: SessionHost): IndexEntry {
  const meta = host.meta!;
  const entry = indexEntryOf({ ...meta, updatedAt: Date.now() }, parseCanonical(meta.key, host.cfg));
  return { ...entry, listed: false, row: { ...entry.row, archived: true } };
}

export function archivePrefix(agentId: string, sessionId: string): string {
  return `subagents/${agentId}/${sessionId}`;
}

/**
 * Export the session to the bucket: the JSONL transcript, its history pages (archive-pages.ts) and,
 * when asked, its attachments. False when no bucket is bound: nothing was exported, so nothing may be freed.
 */
export async function exportToArchive(host: SessionHost, opts: { retainAttachments: boolean }): Promise<boolean> {
  const bucket = host.bindings.ARCHIVE;
  const meta = host.meta;
  if (!bucket || !meta) return false;
  const prefix = archivePrefix(meta.agentId, meta.sessionId);
  const customMetadata = {
    sessionKey: meta.key,
    spawnedBy: meta.spawnedBy ?? "",
    archivedAt: new Date().toISOString(),
  };
  const out = new ArchiveWriter(bucket, `${prefix}.jsonl`, {
    httpMetadata: { contentType: "application/x-ndjson; charset=utf-8" },
    customMetadata,
  });
  try {
    await out.write(
      `${JSON.stringify({
        type: "session",
        version: 1,
        id: meta.sessionId,
        key: meta.key,
        timestamp: new Date(meta.createdAt).toISOString(),
      })}\n`,
    );
    for (let after = 0; ; ) {
      const next = host.transcript.exportChunk(after, TRANSCRIPT_CHUNK_BYTES);
      if (next.lastSeq === null) break;
      await out.write(next.chunk);
      after = next.lastSeq;
    }
    await out.close();
  } catch (err) {
    await out.abort();
    throw err;
  }
  await writeHistoryPages(host, bucket, prefix);
  if (opts.retainAttachments) {
    const names = host.sql.exec<{ name: string }>("SELECT name FROM attachments ORDER BY name").toArray();
    for (const { name } of names) {
      const r = host.sql
        .exec<{ mime_type: string | null; data: ArrayBuffer }>(
          "SELECT mime_type, data FROM attachments WHERE name = ?",
          name,
        )
        .one();
      await bucket.put(`${prefix}/attachments/${encodeURIComponent(name)}`, r.data, {
        httpMetadata: r.mime_type ? { contentType: servedMediaType(r.mime_type) } : undefined,
        customMetadata,
      });
    }
  }
  return true;
}

/** R2's part size floor; every part but the last has exactly this size (R2 wants equal-sized parts). */
export const ARCHIVE_PART_BYTES = 5 * 1024 * 1024;

/**
 * Writes one R2 object from chunks with memory bounded by one part, whatever the transcript's size:
 * a small object is one `put`; once a full part has accumulated, a multipart upload takes over.
 * Re-running an export after a crash simply writes the object again (same key), so it is idempotent.
 */
class ArchiveWriter {
  private buffered: Uint8Array[] = [];
  private bufferedBytes = 0;
  private upload: R2MultipartUpload | null = null;
  private parts: R2UploadedPart[] = [];
  private readonly encoder = new TextEncoder();

  constructor(
    private readonly bucket: R2Bucket,
    private readonly key: string,
    private readonly options: R2PutOptions & R2MultipartOptions,
  ) {}

  async write(text: string): Promise<void> {
    const bytes = this.encoder.encode(text);
    this.buffered.push(bytes);
    this.bufferedBytes += bytes.byteLength;
    while (this.bufferedBytes >= ARCHIVE_PART_BYTES) await this.flushPart();
  }

  async close(): Promise<void> {
    if (!this.upload) {
      await this.bucket.put(this.key, concat(this.buffered, this.bufferedBytes), this.options);
      return;
    }
    if (this.bufferedBytes > 0) await this.uploadPart(this.take(this.bufferedBytes));
    await this.upload.complete(this.parts);
  }

  async abort(): Promise<void> {
    await this.upload?.abort().catch(() => undefined);
  }

  private async flushPart(): Promise<void> {
    this.upload ??= await this.bucket.createMultipartUpload(this.key, this.options);
    await this.uploadPart(this.take(ARCHIVE_PART_BYTES));
  }

  private async uploadPart(body: Uint8Array): Promise<void> {
    this.parts.push(await this.upload!.uploadPart(this.parts.length + 1, body));
  }

  /** The first `n` buffered bytes as one array; the rest stays buffered. */
  private take(n: number): Uint8Array {
    const all = concat(this.buffered, this.bufferedBytes);
    this.buffered = all.byteLength > n ? [all.subarray(n)] : [];
    this.bufferedBytes = all.byteLength - n;
    return all.subarray(0, n);
  }
}

function concat(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

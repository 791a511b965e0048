import type { SessionObject } from "../session/session-object";

/**
 * Cold storage for archived sub-agents (reference §10 item 11): before a child's storage is cleared,
 * its transcript (the same JSONL as `GET /v1/sessions/{key}/transcript.jsonl`) goes to the optional
 * R2 bucket `ARCHIVE`, and its attachments too when `retainOnSessionKeep` asks to keep them.
 * Without the binding, archival only clears the child.
 */

const PAGE = 500;

export function archivePrefix(agentId: string, sessionId: string): string {
  return `subagents/${agentId}/${sessionId}`;
}

export async function exportToArchive(host: SessionObject, opts: { retainAttachments: boolean }): Promise<string | null> {
  const bucket = host.bindings.ARCHIVE;
  const meta = host.meta;
  if (!bucket || !meta) return null;
  const prefix = archivePrefix(meta.agentId, meta.sessionId);
  // Built page by page; a sub-agent transcript is bounded by its few runs, so one body is fine here.
  const lines: string[] = [JSON.stringify({ type: "session", version: 1, id: meta.sessionId, key: meta.key, timestamp: new Date(meta.createdAt).toISOString() })];
  for (let after = 0; ; ) {
    const page = host.transcript.after(after, PAGE);
    if (page.messages.length === 0 || page.lastSeq === null) break;
    for (const m of page.messages) {
      const { __switchboard, ...message } = m;
      lines.push(JSON.stringify({ type: "message", id: String(__switchboard.seq), seq: __switchboard.seq, timestamp: new Date(m.timestamp).toISOString(), message }));
    }
    after = page.lastSeq;
  }
  const customMetadata = { sessionKey: meta.key, spawnedBy: meta.spawnedBy ?? "", archivedAt: new Date().toISOString() };
  await bucket.put(`${prefix}.jsonl`, lines.join("\n") + "\n", { httpMetadata: { contentType: "application/x-ndjson; charset=utf-8" }, customMetadata });
  if (opts.retainAttachments) {
    const names = host.sql.exec<{ name: string }>("SELECT name FROM attachments ORDER BY name").toArray();
    for (const { name } of names) {
      const r = host.sql.exec<{ mime_type: string | null; data: ArrayBuffer }>("SELECT mime_type, data FROM attachments WHERE name = ?", name).one();
      await bucket.put(`${prefix}/attachments/${encodeURIComponent(name)}`, r.data, {
        httpMetadata: r.mime_type ? { contentType: r.mime_type } : undefined,
        customMetadata,
      });
    }
  }
  return `${prefix}.jsonl`;
}

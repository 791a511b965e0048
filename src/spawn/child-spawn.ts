import type { SessionHost } from "../session/host";
import type { EnqueueRequest, RunInput, RunSnapshot } from "../session/types";

/**
 * The child's half of `sessions_spawn` (docs/contract.md, "Flows"): one transaction in the
 * child's object creates the session (lineage, depth, model, thinking, label, sub-agent info),
 * stores its attachments and queues its task run. A spawn is never a multi-step saga with
 * compensating deletes: either the child exists with its task queued, or nothing happened.
 *
 * This module imports no value from the session object (only types), so the object can import it.
 */

export interface ChildAttachment {
  name: string;
  mimeType?: string;
  bytes: number;
  sha256: string;
  data: Uint8Array;
}

export interface SpawnChildRequest {
  init: NonNullable<EnqueueRequest["init"]>;
  input: RunInput & { kind: "subagent_task" };
  attachments: ChildAttachment[];
}

/** The task run's idempotency key: a retried spawn RPC returns the run it created, never a second one. */
export const SUBAGENT_TASK_IDEMPOTENCY_KEY = "subagent:task";

export function spawnChildInObject(host: SessionHost, req: SpawnChildRequest): Promise<RunSnapshot> {
  return host.enqueue({ input: req.input, init: req.init, idempotencyKey: SUBAGENT_TASK_IDEMPOTENCY_KEY }, (h) =>
    storeAttachments(h, req.attachments),
  );
}

/** Inside the spawn transaction. */
function storeAttachments(host: SessionHost, files: ChildAttachment[]): void {
  for (const f of files) {
    host.sql.exec(
      "INSERT INTO attachments (name, mime_type, bytes, sha256, data) VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
      f.name,
      f.mimeType ?? null,
      f.bytes,
      f.sha256,
      toArrayBuffer(f.data),
    );
  }
}

/** Attachment metadata of a session (no content). */
export function listAttachments(
  host: SessionHost,
): { name: string; mimeType?: string; bytes: number; sha256: string }[] {
  if (!host.meta) return [];
  return host.sql
    .exec<{ name: string; mime_type: string | null; bytes: number; sha256: string }>(
      "SELECT name, mime_type, bytes, sha256 FROM attachments ORDER BY name",
    )
    .toArray()
    .map((r) => ({
      name: r.name,
      ...(r.mime_type ? { mimeType: r.mime_type } : {}),
      bytes: r.bytes,
      sha256: r.sha256,
    }));
}

/** One attachment with its bytes, or null. */
export function readAttachment(host: SessionHost, name: string): (ChildAttachment & { data: Uint8Array }) | null {
  if (!host.meta) return null;
  const r = host.sql
    .exec<{ name: string; mime_type: string | null; bytes: number; sha256: string; data: ArrayBuffer }>(
      "SELECT * FROM attachments WHERE name = ?",
      name,
    )
    .toArray()[0];
  if (!r) return null;
  return {
    name: r.name,
    ...(r.mime_type ? { mimeType: r.mime_type } : {}),
    bytes: r.bytes,
    sha256: r.sha256,
    data: new Uint8Array(r.data),
  };
}

function toArrayBuffer(u: Uint8Array): ArrayBuffer {
  return u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength) as ArrayBuffer;
}

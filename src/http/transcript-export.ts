import { displayKey } from "../keys";
import type { SessionMeta } from "../session/types";

type TranscriptSource = {
  transcriptChunk(afterSeq: number): Promise<{ chunk: string; lastSeq: number | null }>;
};

/**
 * A session's transcript as JSON lines (GET /v1/sessions/{key}/transcript.jsonl): one session header
 * line, then its messages, pulled chunk by chunk from the object. Each chunk is at most
 * TRANSCRIPT_CHUNK_BYTES (or one larger message; src/session/byte-budget.ts), so neither the object nor
 * the Worker ever holds more than one chunk of the transcript.
 */
export function transcriptJsonl(meta: SessionMeta, source: TranscriptSource): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let after = 0;
  let headerSent = false;
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      if (!headerSent) {
        headerSent = true;
        ctrl.enqueue(
          enc.encode(
            `${JSON.stringify({
              type: "session",
              version: 1,
              id: meta.sessionId,
              key: displayKey(meta.key),
              timestamp: new Date(meta.createdAt).toISOString(),
            })}\n`,
          ),
        );
        return;
      }
      const next = await source.transcriptChunk(after);
      if (next.lastSeq === null) {
        ctrl.close();
        return;
      }
      after = next.lastSeq;
      ctrl.enqueue(enc.encode(next.chunk));
    },
  });
}

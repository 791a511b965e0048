import type { SessionExtension } from "../src/session/extensions";
import type { SessionHost } from "../src/session/host";
import type { RunStatus } from "../src/session/types";
import { syntheticMessage } from "./seed";

/**
 * The benchmark's calls into a session object, as an extension only the bench Worker's session object
 * has (bench/worker.ts): the production object (src/session/session-object.ts) has no seeding method.
 */
const benchRpc = {
  /**
   * The cheapest call into the object (no storage): the floor the benchmark compares routes against.
   * `padBytes` returns that much filler, to price moving a payload as large as a list page.
   */
  ping(_host: SessionHost, padBytes: number): { ok: true; pad?: string } {
    return padBytes > 0 ? { ok: true, pad: "x".repeat(padBytes) } : { ok: true };
  },

  /** Bytes of this object's SQLite database (docs/scale.md: storage per session object). */
  storedBytes(host: SessionHost): number {
    return host.storage.sql.databaseSize;
  },

  /**
   * Append `count` synthetic turns' messages (user/assistant alternating) in one transaction, so the
   * benchmark builds a 100,000-message transcript in seconds instead of running 50,000 real runs.
   */
  async seedTranscript(
    host: SessionHost,
    arg: { count: number; startText: string; textBytes?: number },
  ): Promise<{ total: number }> {
    await host.ensureSession();
    const first = host.transcript.count() + 1;
    host.storage.transactionSync(() => {
      for (let n = first; n < first + arg.count; n++)
        host.transcript.append(syntheticMessage(n, arg.startText, arg.textBytes), null);
    });
    return { total: first + arg.count - 1 };
  },

  /**
   * Runs in acceptance (qseq) order with the transcript seq of their user message, so the benchmark
   * can prove end to end that queue order equals transcript order.
   */
  runOrder(
    host: SessionHost,
    limit: number,
  ): { runId: string; qseq: number; status: RunStatus; userSeq: number | null }[] {
    if (!host.hasStorage) return [];
    return host.sql
      .exec<{ id: string; qseq: number; status: RunStatus; user_seq: number | null }>(
        "SELECT id, qseq, status, user_seq FROM runs ORDER BY qseq LIMIT ?",
        limit,
      )
      .toArray()
      .map((r) => ({ runId: r.id, qseq: r.qseq, status: r.status, userSeq: r.user_seq }));
  },
};

declare module "../src/session/extensions" {
  interface ExtensionRpc {
    bench: typeof benchRpc;
  }
}

export const benchExtension: SessionExtension = { name: "bench", rpc: benchRpc };

import { z } from "zod";
import type { SessionExtension } from "./extensions";
import type { SessionHost } from "./host";
import { type RunSnapshot, runSnapshotSchema } from "./run-schema";
import type { RunRow } from "./run-types";

/** Rows per listing (docs/limits.md): the console shows the recent runs of one session. */
export const RUNS_LIST_MAX = 100;
/** A listed run's reply or error is cut to this many characters, so a page stays under ~100 KiB. */
export const RUN_TEXT_PREVIEW_CHARS = 1000;

export const runSummarySchema = runSnapshotSchema
  .extend({
    textTruncated: z.literal(true).optional().describe("`reply` or `error` was cut; GET /v1/runs/{id} has it whole"),
  })
  .meta({ id: "RunSummary", description: "A run as a session's run listing shows it." });
export type RunSummary = z.infer<typeof runSummarySchema>;

function preview(run: RunSnapshot): RunSummary {
  const out: RunSummary = { ...run };
  for (const field of ["reply", "error"] as const) {
    const text = out[field];
    if (text !== undefined && text.length > RUN_TEXT_PREVIEW_CHARS) {
      out[field] = text.slice(0, RUN_TEXT_PREVIEW_CHARS);
      out.textTruncated = true;
    }
  }
  return out;
}

/** A session's most recent runs, newest first (by queue order), for GET /v1/sessions/{key}/runs. */
export function listRuns(host: SessionHost, limit: number): RunSummary[] {
  // Reading a session that was never written must not create its tables.
  if (!host.hasStorage) return [];
  const n = Math.max(1, Math.min(limit, RUNS_LIST_MAX));
  return host.sql
    .exec<RunRow>("SELECT * FROM runs ORDER BY qseq DESC LIMIT ?", n)
    .toArray()
    .map((r) => preview(host.snapshot(r)));
}

const runsRpc = { list: (host: SessionHost, opts: { limit: number }) => listRuns(host, opts.limit) };

declare module "./extensions" {
  interface ExtensionRpc {
    runs: typeof runsRpc;
  }
}

/** A session's recent runs over RPC, for GET /v1/sessions/{key}/runs (the console). */
export const runsListExtension: SessionExtension = { name: "runs", rpc: runsRpc };

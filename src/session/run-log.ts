import { log } from "../log";
import type { SessionExtension } from "./extensions";

/**
 * One `run_ended` log line per run, after its ending committed: the run id, the session key, how it
 * ended and what it cost — the line an operator follows from a request's `runId` (src/log.ts).
 */
export const runLogExtension: SessionExtension = {
  name: "run-log",
  afterRunEnded(host, { run }) {
    log[run.status === "ok" ? "info" : "warn"]("run_ended", {
      sessionKey: host.key,
      runId: run.runId,
      kind: run.kind,
      status: run.status,
      ...(run.startedAt && run.endedAt ? { ms: run.endedAt - run.startedAt } : {}),
      ...(run.error ? { error: run.error } : {}),
      ...(run.usage ? { inputTokens: run.usage.input, outputTokens: run.usage.output } : {}),
      ...(run.model ? { model: run.model } : {}),
    });
  },
};

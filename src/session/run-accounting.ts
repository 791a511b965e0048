import type { Config } from "../config/schema";
import type { RunnerResult } from "./run-types";
import type { RunInput, SessionMeta, TranscriptMessage } from "./types";

/**
 * What a run's end adds to its session's figures (tokens, model, context window) and how long a run
 * may take. Kept apart from the session object so its run loop stays about ordering and storage.
 */

export interface RunUsage {
  input: number;
  output: number;
  totalTokens: number;
}

/** The steps a run finished, as recorded in the transcript (their assistant messages carry each call's usage). */
export function recordedStepUsage(sql: SqlStorage, runId: string): { usage: RunUsage; model: string | null } | null {
  const rows = sql
    .exec<{ json: string }>("SELECT json FROM messages WHERE run_id = ? AND role = 'assistant'", runId)
    .toArray();
  const usage: RunUsage = { input: 0, output: 0, totalTokens: 0 };
  let model: string | null = null;
  let counted = false;
  for (const r of rows) {
    const m = JSON.parse(r.json) as TranscriptMessage;
    if (m.role !== "assistant" || !m.usage) continue;
    usage.input += m.usage.input;
    usage.output += m.usage.output;
    usage.totalTokens += m.usage.totalTokens;
    model = `${m.provider}/${m.model}`;
    counted = true;
  }
  return counted ? { usage, model } : null;
}

/** The model's context window from `models.providers.<provider>.models[].contextWindow`, else undefined. */
export function contextWindowOf(cfg: Config, provider: string, modelId: string): number | undefined {
  return cfg.models.providers[provider]?.models?.find((m) => m.id === modelId)?.contextWindow;
}

/**
 * The usage a run ends with: a successful run's own total; a failed, timed-out or aborted run's
 * finished steps, so a run cut short reports the tokens it really spent (not 0).
 */
export function endedRunUsage(
  sql: SqlStorage,
  runId: string,
  result: RunnerResult | undefined,
  ok: boolean,
): { usage: RunUsage; model: string | null } | null {
  if (result && ok)
    return {
      usage: { input: result.usage.input, output: result.usage.output, totalTokens: result.usage.totalTokens },
      model: `${result.provider}/${result.model}`,
    };
  return recordedStepUsage(sql, runId);
}

/** Add a run's usage to the session's counters; `contextTokens` is the model's window, unset when unknown. */
export function addRunUsage(meta: SessionMeta, cfg: Config, usage: RunUsage, result?: RunnerResult): void {
  meta.inputTokens += usage.input;
  meta.outputTokens += usage.output;
  meta.totalTokens += usage.totalTokens;
  if (!result) return;
  meta.model = result.model;
  meta.modelProvider = result.provider;
  const window = contextWindowOf(cfg, result.provider, result.model);
  if (window !== undefined) meta.contextTokens = window;
  else delete meta.contextTokens;
}

/**
 * The run's deadline in seconds, or null for none. A sub-agent's task run has exactly the timeout it
 * was spawned with (`runTimeoutSeconds`, 0 = none): it replaces `agents.defaults.timeoutSeconds`, so a
 * long research child is not cut at the general deadline. Its lease timer still catches a lost
 * executor (session-object.ts `onLeaseExpired`). Every other run has its own or the general deadline.
 */
export function runDeadlineSeconds(input: RunInput, cfg: Config): number | null {
  const own = input.timeoutSeconds && input.timeoutSeconds > 0 ? input.timeoutSeconds : null;
  if (input.kind === "subagent_task") return own;
  // `agents.defaults.timeoutSeconds: 0` is OpenClaw's "unlimited": no deadline timer (the lease still catches a lost executor).
  return own ?? (cfg.agents.defaults.timeoutSeconds > 0 ? cfg.agents.defaults.timeoutSeconds : null);
}

import { log } from "../log";
import { type ResolvedModel, resolveModel } from "../runners/models";
import { parseThinkingLevel, type ThinkingLevel } from "../runners/thinking";
import { storedTextBytes } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import type { TranscriptMessage } from "../session/types";
import {
  BYTES_PER_TOKEN,
  CONTEXT_ROWS,
  type CompactionPlan,
  contextBudgetBytes,
  parseByteSize,
  planCompaction,
} from "./plan";
import { latestCompaction, writeCompaction } from "./store";
import { summarize } from "./summarize";

/**
 * A run's model context (docs/compaction.md): the latest compaction's summary and the messages from its
 * first kept message on, the newest that fit the byte budget. Before it is read, a context that no longer
 * fits is compacted (`agents.defaults.compaction`): the older turns are summarised by the model and the
 * summary kept in the transcript. A compaction that fails or times out leaves the history as it was (the
 * run then sees the newest messages that fit, as without compaction); it never fails the run.
 */

export interface RunContext {
  summary?: string;
  history: TranscriptMessage[];
}

export interface ContextRequest {
  runId: string;
  model: ResolvedModel;
  /** The run's thinking level (`compaction.thinkingLevel: "inherit"` uses it). */
  thinking?: ThinkingLevel;
  signal: AbortSignal;
  /** The `fetch` of provider requests (src/runners/models.ts). */
  fetch?: typeof fetch;
}

/** The context window of a model, in tokens, when its provider block declares one (`contextTokens` wins). */
function windowOf(host: SessionHost, model: ResolvedModel): number | undefined {
  const row = host.cfg.models.providers[model.provider]?.models?.find((m) => m.id === model.modelId);
  return row?.contextTokens ?? row?.contextWindow;
}

export async function runContext(host: SessionHost, req: ContextRequest): Promise<RunContext> {
  const maxBytes = host.cfg.limits.maxContextBytes;
  let latest = latestCompaction(host);
  const settings = host.cfg.agents.defaults.compaction;
  const rows = host.transcript.turnSizes(latest?.firstKeptSeq ?? 0, CONTEXT_ROWS);
  const plan = planCompaction({
    rows,
    summaryBytes: latest ? storedTextBytes(latest.summary) : 0,
    budgetBytes: contextBudgetBytes(windowOf(host, req.model), maxBytes),
    settings: {
      enabled: settings.enabled,
      keepRecentTokens: settings.keepRecentTokens,
      recentTurnsPreserve: settings.recentTurnsPreserve,
      maxActiveBytes: parseByteSize(settings.maxActiveTranscriptBytes),
    },
  });
  if (plan && (await compact(host, req, plan, latest?.summary))) latest = latestCompaction(host);
  return {
    ...(latest ? { summary: latest.summary } : {}),
    history: host.transcript.recent(CONTEXT_ROWS, maxBytes, latest?.firstKeptSeq ?? 0),
  };
}

/** The model that writes summaries: `compaction.model` when it resolves, else the run's own. */
function summaryModel(host: SessionHost, req: ContextRequest): ResolvedModel {
  const ref = host.cfg.agents.defaults.compaction.model;
  if (!ref) return req.model;
  try {
    return resolveModel(host.cfg, host.bindings, ref, { agentId: host.meta?.agentId, fetch: req.fetch });
  } catch {
    return req.model; // named on /healthz when the config loaded (src/config/agent-checks.ts)
  }
}

async function compact(
  host: SessionHost,
  req: ContextRequest,
  plan: CompactionPlan,
  previous: string | undefined,
): Promise<boolean> {
  const settings = host.cfg.agents.defaults.compaction;
  const model = summaryModel(host, req);
  const level =
    settings.thinkingLevel === "inherit" ? req.thinking : parseThinkingLevel(settings.thinkingLevel ?? undefined);
  const started = Date.now();
  log.info("compaction_started", { sessionKey: host.key, runId: req.runId, model: model.ref });
  try {
    const summary = await summarize({
      model,
      previous,
      messages: host.transcript.between(plan.fromSeq, plan.cutSeq),
      keepIdentifiers: settings.identifierPolicy === "strict",
      timeoutMs: settings.timeoutSeconds * 1000,
      signal: req.signal,
      providerOptions: model.thinkingOptions(level),
    });
    const tokensBefore = Math.ceil(plan.activeBytes / BYTES_PER_TOKEN);
    const tokensAfter = Math.ceil((storedTextBytes(summary) + plan.keptBytes) / BYTES_PER_TOKEN);
    const written = writeCompaction(host, {
      runId: req.runId,
      firstKeptSeq: plan.cutSeq,
      summary,
      tokensBefore,
      tokensAfter,
    });
    log.info("compaction_done", {
      sessionKey: host.key,
      runId: req.runId,
      ms: Date.now() - started,
      tokensBefore,
      tokensAfter,
      written,
    });
    return written;
  } catch (err) {
    // The run goes on with the history as it was: a failed summary must not fail the turn, nor lose anything.
    log.warn("compaction_failed", { sessionKey: host.key, runId: req.runId, error: err });
    return false;
  }
}

import { textOf } from "../runners/model-runner";
import { splitModelRef } from "../runners/models";
import type { SessionHost } from "../session/host";
import type { TranscriptMessage } from "../session/types";
import { estimateCostUsd, partialProgress, type RunOutcome } from "./announce-format";

/** What a sub-agent's ended task run leaves for its announce, read from its transcript rows and config. */

export function latestToolResultText(host: SessionHost, runId: string): string | null {
  const r = host.sql
    .exec<{ json: string }>(
      "SELECT json FROM messages WHERE run_id = ? AND role = 'toolResult' ORDER BY seq DESC LIMIT 1",
      runId,
    )
    .toArray()[0];
  if (!r) return null;
  const msg = JSON.parse(r.json) as TranscriptMessage;
  return textOf(msg.content).trim() || null;
}

/**
 * Partial progress of a task run that timed out while it worked with tools (test/spawn/subagent-run-timeout.test.ts):
 * its tool calls and last assistant fragments, or null when it made no tool call.
 */
export function partialProgressOf(host: SessionHost, runId: string, latestToolResult: string | null): string | null {
  const assistant = host.sql
    .exec<{ json: string }>("SELECT json FROM messages WHERE run_id = ? AND role = 'assistant' ORDER BY seq", runId)
    .toArray()
    .map((r) => JSON.parse(r.json) as TranscriptMessage);
  let toolCalls = 0;
  const fragments: string[] = [];
  for (const m of assistant) {
    if (!Array.isArray(m.content)) continue;
    toolCalls += m.content.filter((b) => b.type === "toolCall").length;
    const text = textOf(m.content).trim();
    if (text) fragments.push(text);
  }
  return toolCalls > 0 ? partialProgress(toolCalls, fragments, latestToolResult) : null;
}

export function costOf(
  host: SessionHost,
  modelRef: string | undefined,
  usage: { input: number; output: number },
): number | null {
  const parts = modelRef ? splitModelRef(modelRef) : null;
  if (!parts) return null;
  const cost = host.cfg.models.providers[parts.provider]?.models?.find((m) => m.id === parts.modelId)?.cost;
  return estimateCostUsd(usage, cost);
}

export function outcomeOf(status: string): RunOutcome {
  return status === "ok" || status === "timeout" || status === "aborted" || status === "lost" ? status : "error";
}

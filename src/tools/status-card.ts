import { agentThinking } from "../config/load";
import type { Config } from "../config/schema";
import { displayKey } from "../keys";
import { splitModelRef } from "../runners/model-resolution";
import type { StatusFacts } from "../session/status-rpc";
import { estimateCostUsd } from "../spawn/announce-format";

/**
 * The status card of `session_status` (docs/contract.md, "session_status"): one line per fact, sections
 * separated by blank lines, empty lines left out. Built in the Worker from the facts the session object
 * returned (src/session/status-rpc.ts), so the object does no formatting.
 */
export interface CardModel {
  /** The model the next run uses (`<provider>/<model>`), and where that choice comes from. */
  ref: string;
  source: "session override" | "agent default";
}

export function statusCard(cfg: Config, facts: StatusFacts, model: CardModel, now: number): string {
  const sections: string[][] = [];
  const last = facts.lastModel && facts.lastModel !== model.ref ? ` · last run: ${facts.lastModel}` : "";
  const clear = model.source === "session override" ? ' · clear with model "default"' : "";
  sections.push([`🧠 Model: ${model.ref} (${model.source}${clear})${last}`]);

  const tokens = `🧮 Tokens: ${n(facts.inputTokens)} in · ${n(facts.outputTokens)} out · ${n(facts.totalTokens)} total`;
  const context =
    facts.contextUsed !== undefined || facts.contextWindow !== undefined
      ? `📚 Context: ${facts.contextUsed !== undefined ? n(facts.contextUsed) : "?"}/${facts.contextWindow !== undefined ? n(facts.contextWindow) : "?"}${facts.contextUsed !== undefined && facts.contextWindow ? ` (${Math.round((facts.contextUsed / facts.contextWindow) * 100)}%)` : ""}`
      : "📚 Context: unknown (no model step yet, or no contextWindow configured)";
  sections.push([
    tokens,
    `💵 Cost: ${costLine(cfg, facts)}`,
    context,
    facts.compactions > 0 ? `🧹 Compactions: ${facts.compactions}` : "",
  ]);

  const lineage = facts.spawnedBy
    ? ` • sub-agent of ${displayKey(facts.spawnedBy)} (depth ${facts.spawnDepth ?? 1}${facts.subagentStatus ? `, ${facts.subagentStatus}` : ""})`
    : "";
  const label = facts.label ? ` • label "${facts.label}"` : "";
  const children = facts.children.running + facts.children.ended;
  sections.push([
    `🧵 Session: ${displayKey(facts.key)} • id ${facts.sessionId}${label}${lineage} • created ${ago(facts.createdAt, now)}`,
    `📌 Tasks: ${children === 0 ? "no sub-agents" : `${facts.children.running} active · ${facts.children.ended} finished sub-agent(s)`}`,
    facts.running
      ? `🏃 Running: ${facts.running.runId} (${facts.running.kind}${facts.running.startedAt !== undefined ? `, started ${ago(facts.running.startedAt, now)}` : ""})`
      : `🏃 Running: idle${facts.abortedLastRun ? " (last run was aborted)" : ""}`,
    `🪢 Queue: ${facts.queued} queued`,
    `🕒 Last activity: ${new Date(facts.updatedAt).toISOString()} (${ago(facts.updatedAt, now)})`,
  ]);

  sections.push([
    `🎛️ Modes: think ${facts.thinkingLevel ?? agentThinking(cfg, facts.agentId) ?? "off"} · verbose ${facts.verboseLevel ?? "off"}${facts.sendPolicy ? ` · send ${facts.sendPolicy}` : ""}`,
    `🔖 State version: ${facts.stateVersion}`,
  ]);
  return sections
    .map((lines) => lines.filter(Boolean).join("\n"))
    .filter(Boolean)
    .join("\n\n");
}

/** An estimate at the prices of the last run's model (models.providers.<p>.models[].cost), as announces show it. */
function costLine(cfg: Config, facts: StatusFacts): string {
  const parts = facts.lastModel ? splitModelRef(facts.lastModel) : null;
  const price = parts
    ? cfg.models.providers[parts.provider]?.models?.find((m) => m.id === parts.modelId)?.cost
    : undefined;
  const usd = estimateCostUsd({ input: facts.inputTokens, output: facts.outputTokens }, price);
  if (usd === null) return "not priced (no cost configured for the session's model)";
  return `~$${usd.toFixed(usd < 0.01 ? 4 : 2)} (estimated at ${facts.lastModel} prices)`;
}

function n(x: number): string {
  return x.toLocaleString("en-US");
}

function ago(at: number, now: number): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

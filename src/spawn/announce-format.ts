/**
 * The sub-agent completion announce text (DESIGN §3.6 "Sub-agent announce"; reference §4.5 items 6–7).
 *
 * Status comes from the runtime outcome only — never from what the model wrote — so a child that
 * claims success in its reply but timed out is still reported as `timed out`.
 */

export type RunOutcome = "ok" | "timeout" | "error" | "aborted";

export type SilentToken = "ANNOUNCE_SKIP" | "REPLY_SKIP" | "NO_REPLY";

export function statusLabel(outcome: RunOutcome, error?: string): string {
  switch (outcome) {
    case "ok":
      return "completed successfully";
    case "timeout":
      return "timed out";
    case "error": {
      const e = typeof error === "string" ? error.trim() : "";
      return `failed: ${e || "unknown error"}`;
    }
    case "aborted":
      return "failed: aborted";
    default:
      // Reachable only through untyped callers (e.g. a row written by a newer version).
      return "finished with unknown status";
  }
}

/** `Xh Ym` / `Ym Xs` / `Xs`, rounded to the nearest second; `n/a` when unknown or nonsensical. */
export function formatDuration(ms: number | undefined): string {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "n/a";
  const totalSeconds = Math.round(ms / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${seconds}s`;
  return `${seconds}s`;
}

/** `999`, `1.0k`, `1.2k`, `3.4m` (one decimal). Rounding never yields `1000.0k`: that becomes `1.0m`. */
export function formatTokenCount(n: number): string {
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return "0";
  const v = Math.round(n);
  if (v < 1000) return String(v);
  const k = (v / 1000).toFixed(1);
  if (Number(k) < 1000) return `${k}k`;
  return `${(v / 1_000_000).toFixed(1)}m`;
}

/** `$x.xx` from one cent up, `$x.xxxx` below (so tiny runs do not all read `$0.00`). */
export function formatCostUsd(usd: number): string {
  return usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

/**
 * Estimated cost from per-million-token prices (`models.providers.*.models[].cost`).
 * null when the model has no prices, so the stats line omits the cost instead of showing `$0`.
 */
export function estimateCostUsd(
  usage: { input: number; output: number },
  cost?: { input?: number; output?: number },
): number | null {
  if (!cost) return null;
  const pin = typeof cost.input === "number" && Number.isFinite(cost.input) ? cost.input : undefined;
  const pout = typeof cost.output === "number" && Number.isFinite(cost.output) ? cost.output : undefined;
  if (pin === undefined && pout === undefined) return null;
  const tin = Number.isFinite(usage?.input) ? usage.input : 0;
  const tout = Number.isFinite(usage?.output) ? usage.output : 0;
  return (tin * (pin ?? 0) + tout * (pout ?? 0)) / 1_000_000;
}

/** Exact control-token match after trimming: `"ANNOUNCE_SKIP."` or `"NO_REPLY please"` are real text. */
export function isSilentToken(text: string | null | undefined, token: SilentToken): boolean {
  return typeof text === "string" && text.trim() === token;
}

function nonEmpty(s: string | null | undefined): string | null {
  if (typeof s !== "string") return null;
  const t = s.trim();
  return t ? t : null;
}

export interface SubagentAnnounceInput {
  outcome: RunOutcome;
  error?: string;
  finalReply?: string | null;
  latestToolResult?: string | null;
  notes?: string | null;
  runtimeMs?: number;
  usage?: { input: number; output: number };
  costUsd?: number | null;
  sessionKey: string;
  sessionId: string;
  transcriptPath: string;
}

export function formatStatsLine(input: Omit<SubagentAnnounceInput, "outcome" | "error" | "finalReply" | "latestToolResult" | "notes">): string {
  const tin = input.usage?.input ?? 0;
  const tout = input.usage?.output ?? 0;
  const parts = [
    `runtime ${formatDuration(input.runtimeMs)}`,
    `tokens ${formatTokenCount(tin + tout)} (in ${formatTokenCount(tin)} / out ${formatTokenCount(tout)})`,
  ];
  if (typeof input.costUsd === "number" && Number.isFinite(input.costUsd) && input.costUsd >= 0) {
    parts.push(`est ${formatCostUsd(input.costUsd)}`);
  }
  parts.push(`sessionKey ${input.sessionKey}`, `sessionId ${input.sessionId}`, `transcript ${input.transcriptPath}`);
  return `Stats: ${parts.join(" • ")}`;
}

/**
 * ```
 * Status: <label>
 * Result: <final reply | latest tool result | (no output)>
 * Notes: <notes>            (only when non-empty)
 * Stats: runtime … • tokens … (in … / out …)[ • est $…] • sessionKey … • sessionId … • transcript …
 * ```
 */
export function formatSubagentAnnounce(input: SubagentAnnounceInput): string {
  const result = nonEmpty(input.finalReply) ?? nonEmpty(input.latestToolResult) ?? "(no output)";
  const lines = [`Status: ${statusLabel(input.outcome, input.error)}`, `Result: ${result}`];
  const notes = nonEmpty(input.notes);
  if (notes) lines.push(`Notes: ${notes}`);
  lines.push(formatStatsLine(input));
  return lines.join("\n");
}

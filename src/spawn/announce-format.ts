import { cutText, storedTextBytes } from "../session/byte-budget";

/**
 * The sub-agent completion announce text (docs/contract.md, "Flows"; test/spawn/announce-format.test.ts).
 *
 * Status comes from the runtime outcome only — never from what the model wrote — so a child that
 * claims success in its reply but timed out is still reported as `timed out`.
 */

export type RunOutcome = "ok" | "timeout" | "error" | "aborted" | "lost" | "cancelled";

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
    case "cancelled": {
      // Ended by `subagents cancel`, its own or an ancestor's (src/tasks/task-cancel.ts): the reason it was given.
      const e = typeof error === "string" ? error.trim() : "";
      return e ? `cancelled: ${e}` : "cancelled";
    }
    case "lost": {
      // Not "failed": nobody knows how far the child got, only that nothing runs it any more (docs/subagents.md).
      const e = typeof error === "string" ? error.trim() : "";
      return `lost: ${e || "its executor is gone"}`;
    }
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

/** What a child's announce hands its requester besides the message: its status label and Result. */
export interface ChildOutcome {
  status: string;
  result: string;
}

/** A direct child, as its parent sub-agent reports it (outcome null while it has not announced). */
export interface ChildFinding {
  childKey: string;
  label?: string;
  outcome: ChildOutcome | null;
}

const UNTRUSTED_BEGIN = "<<<BEGIN_UNTRUSTED_CHILD_RESULT>>>";
const UNTRUSTED_END = "<<<END_UNTRUSTED_CHILD_RESULT>>>";

/** A child's text can never close its own fence early: marker look-alikes inside it are escaped. */
export function fenceUntrusted(text: string): string {
  const safe = text
    .replaceAll(UNTRUSTED_BEGIN, "[[BEGIN_UNTRUSTED_CHILD_RESULT]]")
    .replaceAll(UNTRUSTED_END, "[[END_UNTRUSTED_CHILD_RESULT]]");
  return `${UNTRUSTED_BEGIN}\n${safe}\n${UNTRUSTED_END}`;
}

/**
 * "Child completion results:" (as in OpenClaw; test/spawn/subagent-descendants.test.ts): every direct child in creation
 * order, each with its status and its result fenced as untrusted data. Not truncated here: the
 * announcing child freezes its whole Result (its own text and these findings) at 100 KB.
 */
export function formatChildFindings(children: ChildFinding[]): string {
  const blocks = children.map((c, i) => {
    const head = `${i + 1}. ${c.childKey}${c.label ? ` (${c.label})` : ""}`;
    if (!c.outcome) return `${head}\nstatus: still running (no result before this announce)`;
    return `${head}\nstatus: ${c.outcome.status}\n${fenceUntrusted(c.outcome.result)}`;
  });
  return ["Child completion results:", ...blocks].join("\n\n");
}

/**
 * What a run that timed out while working with tools achieved (test/spawn/subagent-run-timeout.test.ts):
 * `[Partial progress: <n> tool call(s) executed before timeout]` and its last ≤3 assistant fragments;
 * without fragments, the latest tool result (which OpenClaw drops) so the work is not lost.
 */
export function partialProgress(
  toolCalls: number,
  assistantFragments: string[],
  latestToolResult: string | null,
): string {
  const lines = [`[Partial progress: ${toolCalls} tool call(s) executed before timeout]`];
  const fragments = assistantFragments
    .map((f) => f.trim())
    .filter(Boolean)
    .slice(-3);
  if (fragments.length > 0) lines.push(...fragments);
  else if (latestToolResult?.trim()) lines.push(`Latest tool result: ${latestToolResult.trim()}`);
  return lines.join("\n");
}

export interface SubagentAnnounceInput {
  outcome: RunOutcome;
  error?: string;
  finalReply?: string | null;
  latestToolResult?: string | null;
  /** Direct children spawned during the task run (reported after the child's own result). */
  children?: ChildFinding[];
  notes?: string | null;
  runtimeMs?: number;
  usage?: { input: number; output: number };
  costUsd?: number | null;
  sessionKey: string;
  sessionId: string;
  transcriptPath: string;
}

export function formatStatsLine(
  input: Omit<SubagentAnnounceInput, "outcome" | "error" | "finalReply" | "latestToolResult" | "children" | "notes">,
): string {
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
 * A Result is frozen at this size (docs/limits.md), so flow rows, hand-offs and deliveries stay bounded.
 * Measured in stored bytes (docs/limits.md), so no characters (escaped controls) can make it larger in a row.
 */
const FROZEN_RESULT_MAX_BYTES = 100 * 1024;

export function freezeResult(text: string | null): string | null {
  if (text === null || storedTextBytes(text) <= FROZEN_RESULT_MAX_BYTES) return text;
  const kb = Math.round(storedTextBytes(text) / 1024);
  return `${cutText(text, FROZEN_RESULT_MAX_BYTES)}\n[truncated: frozen completion output exceeded 100KB (${kb}KB)]`;
}

/**
 * The Result of an announce: the final reply, else the fallback (latest tool result or partial
 * progress), else `(no output)`; then the direct children's results when there are any. A parent that
 * only orchestrated (no text of its own) reports its children's results as its Result.
 */
export function announceResult(
  input: Pick<SubagentAnnounceInput, "finalReply" | "latestToolResult" | "children">,
): string {
  const own = nonEmpty(input.finalReply) ?? nonEmpty(input.latestToolResult);
  const findings = input.children && input.children.length > 0 ? formatChildFindings(input.children) : null;
  if (!findings) return own ?? "(no output)";
  // An orchestrator's children (and theirs) can add up past one child's cap: the whole Result is frozen.
  return freezeResult(own ? `${own}\n\n${findings}` : findings)!;
}

/**
 * ```
 * Status: <label>
 * Result: <final reply | latest tool result | (no output)>
 *
 * Child completion results:  (only when the child spawned children of its own)
 * …
 * Notes: <notes>            (only when non-empty)
 * Stats: runtime … • tokens … (in … / out …)[ • est $…] • sessionKey … • sessionId … • transcript …
 * ```
 */
export function formatSubagentAnnounce(input: SubagentAnnounceInput): string {
  const lines = [`Status: ${statusLabel(input.outcome, input.error)}`, `Result: ${announceResult(input)}`];
  const notes = nonEmpty(input.notes);
  if (notes) lines.push(`Notes: ${notes}`);
  lines.push(formatStatsLine(input));
  return lines.join("\n");
}

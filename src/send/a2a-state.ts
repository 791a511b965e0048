import { getFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import type { RunSnapshot } from "../session/types";

/** The persisted state of an agent-to-agent flow (src/send/a2a-flow.ts): its `flows` row and the timer kinds that drive it. */

export const FLOW_TIMER = "a2a";
export const NOTIFY_TIMER = "a2a_notify";

/** What `sessions_send` stores on the primary run for the flow (the flow row is written when that run ends). */
export interface A2aStart {
  requesterKey?: string;
  /** The requester's session existed when it sent: if it is gone by its turn, it was deleted and is not re-created. */
  requesterExisted?: boolean;
  requesterChannel?: string;
  targetDisplayKey: string;
  maxTurns: number;
}

export type FlowOutcome = "announced" | "announce_skipped" | "announce_no_reply" | "no_round_one_reply" | "failed";

export interface FlowState {
  id: string;
  requesterKey?: string;
  requesterExisted?: boolean;
  requesterChannel?: string;
  targetKey: string;
  targetDisplayKey: string;
  targetChannel: string;
  /** Quoted in the announce prompt: cut at FLOW_QUOTE_BYTES, like the two replies below (the row stays bounded). */
  originalMessage: string;
  primaryRunId: string;
  roundOneReply?: string;
  latestReply?: string;
  maxTurns: number;
  /** Increases with every step; a report for another step number is stale. */
  stepNo: number;
  step: "turn" | "announce" | "done";
  turn?: number;
  stepSession?: string;
  /** The one whole text the flow holds: what the current step's run receives (a run reply, so within the message cap). */
  stepMessage?: string;
  stepRunId?: string;
  /** Guard re-checks made for the current step (the first extension gives a lost executor its lease). */
  guardChecks: number;
  /** Each turn's reply is kept as an excerpt (TURN_EXCERPT_BYTES); the whole text is in the run (`runId`). */
  turns: { turn: number; sessionKey: string; runId?: string; reply?: string; status: string }[];
  outcome?: FlowOutcome;
  /** Outcome "failed": which step gave up and why (its timer is listed under GET /v1/sessions/{key}/timers/dead). */
  error?: string;
  deliveryId?: string;
  deliveryStatus?: string;
}

/** What a step's run came to, as reported by its session or found by the guard. */
export interface StepResult {
  status: RunSnapshot["status"];
  reply?: string;
  runId?: string;
}

/**
 * A flow row holds references and cut copies, never unbounded text (docs/limits.md): five 512 KiB turns
 * copied whole would pass SQLite's 2 MB row limit. Quotes for the announce prompt and turn excerpts are cut here.
 */
export const FLOW_QUOTE_BYTES = 16 * 1024;
export const TURN_EXCERPT_BYTES = 4 * 1024;
const FLOW_LIST_BYTES = 2 * 1024 * 1024;

export function loadFlow(host: SessionHost, id: string): FlowState | null {
  return getFlowRow<FlowState>(host.sql, id, "a2a")?.data ?? null;
}

export function saveFlow(host: SessionHost, f: FlowState): void {
  putFlowRow(host.sql, { id: f.id, kind: "a2a", state: f.step, data: f }, "update");
  if (f.step === "done") host.timers.clear(FLOW_TIMER, f.id);
}

/** Oldest first, up to 500 flows and FLOW_LIST_BYTES (rows are read one by one and the read stops there). */
export function listFlows(host: SessionHost): FlowState[] {
  const out: FlowState[] = [];
  if (!host.hasStorage) return out;
  let bytes = 0;
  for (const r of host.sql.exec<{ json: string }>(
    "SELECT json FROM flows WHERE kind = 'a2a' ORDER BY created_at LIMIT 500",
  )) {
    bytes += r.json.length;
    if (out.length > 0 && bytes > FLOW_LIST_BYTES) break;
    out.push(JSON.parse(r.json) as FlowState);
  }
  return out;
}

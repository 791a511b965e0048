import { getFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import type { DeadTimer, TimerKind } from "../session/timer-policy";
import type { SubagentInfo } from "../session/types";
import { reportTaskSync } from "../tasks/task-report";
import { announceResult, type ChildFinding, type ChildOutcome, type RunOutcome, statusLabel } from "./announce-format";
import type { CompletionEvent } from "./completion-event";

/**
 * The child's announce flow row (`announce:<taskRunId>`, kind `subagent_announce_out`): its states,
 * the material frozen in it, the timers that move it on, and what happens when one of them dies
 * (the flow turns "failed"; an operator retry puts it back; test/session/dead-timers.test.ts).
 */

export const ANNOUNCE_FLOW = "subagent_announce_out";
export const ANNOUNCE_TIMER = "subagent-announce";
export const HANDOFF_TIMER = "subagent-handoff";
export const DESCENDANTS_TIMER = "subagent-descendants";

/** What the announce needs, frozen when the task run ends (state of the flow row `announce:<taskRunId>`). */
export interface AnnounceMaterial {
  taskRunId: string;
  outcome: RunOutcome;
  error?: string;
  finalReply: string | null;
  /** Result when the final reply is empty: partial progress (timeout amid tool calls) or the latest tool result. */
  fallbackResult: string | null;
  taskStartedAt: number;
  taskEndedAt: number;
  /** The task ended while its own children still ran; the announce waited for them. */
  deferred?: boolean;
  /** Direct children spawned during the task run, in creation order (fixed when the announce step starts). */
  children?: ChildFinding[];
  runtimeMs?: number;
  usage: { input: number; output: number };
  costUsd: number | null;
  /** Set when the announce step ended: the text to hand off, or null for silence. */
  message?: string | null;
  /** State "failed": the timer that gave up (listed under GET /v1/sessions/{key}/timers/dead) and why. */
  failure?: { timer: string; attempts: number; error: string };
  /** Set with `message` in "requester" delivery: the completion event the requester's turn runs on. */
  event?: CompletionEvent;
}

/** Status and Result of the announce, as the step's prompt and the hand-off to the requester see them. */
export function announcedOutcome(m: AnnounceMaterial): ChildOutcome {
  return {
    status: statusLabel(m.outcome, m.error),
    result: announceResult({ finalReply: m.finalReply, latestToolResult: m.fallbackResult, children: m.children }),
  };
}

export type FlowState = "waiting" | "step" | "handoff" | "done" | "failed";
const flowId = (taskRunId: string) => `announce:${taskRunId}`;

export function readFlow(
  host: SessionHost,
  taskRunId: string,
): { state: FlowState; material: AnnounceMaterial } | null {
  const r = getFlowRow<AnnounceMaterial, FlowState>(host.sql, flowId(taskRunId));
  return r ? { state: r.state, material: r.data } : null;
}

export function writeFlow(host: SessionHost, state: FlowState, m: AnnounceMaterial): void {
  putFlowRow(host.sql, { id: flowId(m.taskRunId), kind: ANNOUNCE_FLOW, state, data: m }, "update");
}

/**
 * The flow a lifecycle timer acts on, when it is still in the state the timer was set for; otherwise
 * the timer is stale (the flow moved on, or the session lost its sub-agent info) and is cleared.
 */
export function flowAt(
  host: SessionHost,
  taskRunId: string,
  state: FlowState,
  timerKind: string,
): { material: AnnounceMaterial; sub: SubagentInfo } | null {
  const flow = readFlow(host, taskRunId);
  const sub = host.meta?.subagent;
  if (!flow || flow.state !== state || !sub) {
    host.timers.clear(timerKind, taskRunId);
    return null;
  }
  return { material: flow.material, sub };
}

/**
 * Move announces that waited for this session's children on to their announce step. Runs inside the
 * transaction that ended the last child's slot (or from the cap timer), so the step cannot be lost.
 */
export function resumeDeferredAnnounces(host: SessionHost): void {
  const waiting = host.sql
    .exec<{ json: string }>("SELECT json FROM flows WHERE kind = ? AND state = 'waiting'", ANNOUNCE_FLOW)
    .toArray();
  for (const r of waiting) {
    const m = JSON.parse(r.json) as AnnounceMaterial;
    writeFlow(host, "step", m);
    host.timers.clear(DESCENDANTS_TIMER, m.taskRunId);
    host.timers.set(ANNOUNCE_TIMER, m.taskRunId, Date.now());
  }
}

/** The state each announce timer drives; its death leaves the flow "failed" and an operator retry puts it back. */
const ANNOUNCE_TIMER_STATES: Record<string, FlowState> = { [ANNOUNCE_TIMER]: "step", [HANDOFF_TIMER]: "handoff" };

function announceGaveUp(host: SessionHost, dead: DeadTimer): void {
  const flow = readFlow(host, dead.ref);
  if (!flow || flow.state !== ANNOUNCE_TIMER_STATES[dead.kind]) return;
  writeFlow(host, "failed", {
    ...flow.material,
    failure: { timer: dead.kind, attempts: dead.attempts, error: dead.lastError },
  });
  // Its requester's ledger learns the result will not arrive: a succeeded task becomes `blocked` (docs/tasks.md).
  reportTaskSync(host, { deliveryStatus: "failed", terminalOutcome: "blocked" });
}

function reviveAnnounce(host: SessionHost, dead: DeadTimer): boolean {
  const flow = readFlow(host, dead.ref);
  if (flow?.state !== "failed" || flow.material.failure?.timer !== dead.kind) return false;
  const { failure: _failure, ...material } = flow.material;
  writeFlow(host, ANNOUNCE_TIMER_STATES[dead.kind], material);
  reportTaskSync(host, { deliveryStatus: "pending", terminalOutcome: "succeeded" });
  return true;
}

/** The announce flow's timer kinds, run by the sub-agent lifecycle extension (src/spawn/subagent-lifecycle.ts). */
export const ANNOUNCE_TIMER_KINDS: Record<string, TimerKind<SessionHost>> = {
  [ANNOUNCE_TIMER]: { onDead: announceGaveUp, revive: reviveAnnounce },
  // The requester may be busy or restarting for a while: about an hour of attempts before the hand-off gives up.
  [HANDOFF_TIMER]: {
    policy: { maxAttempts: 10, baseDelayMs: 5_000, maxDelayMs: 10 * 60_000 },
    onDead: announceGaveUp,
    revive: reviveAnnounce,
  },
};

import { formatDuration, formatTokenCount } from "../spawn/announce-format";
import type { TreeTask } from "./task-tree";
import { isTerminalTask, type TaskRecord } from "./task-types";

/**
 * What `subagents` shows of ledger tasks (docs/tasks.md, "subagents"): OpenClaw's TaskRow (a task in the
 * model's words) and RunView (a sub-agent's run, numbered, with its text line).
 */

/** Error previews shown to the model are cut to this many characters. */
export const ERROR_PREVIEW_CHARS = 120;
const LABEL_CHARS = 48;
const TASK_CHARS = 72;

export interface TaskRowView {
  taskId: string;
  runtime: TaskRecord["runtime"];
  deliveryStatus: TaskRecord["deliveryStatus"];
  execution: { state: "queued" | "running" | "finished"; lastActivityAt?: number };
  status: "queued" | "running" | "completed" | "blocked" | "failed" | "timed_out" | "cancelled";
  label?: string;
  terminalSummary?: string;
  terminalOutcome?: "succeeded" | "blocked";
  error?: string;
}

export interface RunView {
  index: number;
  runId: string;
  sessionKey: string;
  label: string;
  task: string;
  status: string;
  execution: TaskRowView["execution"];
  deliveryStatus: TaskRecord["deliveryStatus"];
  pendingDescendants: number;
  runtime: string;
  runtimeMs: number;
  model: string;
  totalTokens: number;
  startedAt: number;
  endedAt?: number;
}

function cut(text: string, max: number): string {
  const one = text.replace(/\s+/g, " ").trim();
  return one.length <= max ? one : `${one.slice(0, max - 1)}…`;
}

/** The ledger's status in the model's words: succeeded → completed (blocked when its result never arrived), lost → failed. */
export function modelStatus(t: TaskRecord): TaskRowView["status"] {
  switch (t.status) {
    case "succeeded":
      return t.terminalOutcome === "blocked" ? "blocked" : "completed";
    case "lost":
      return "failed";
    default:
      return t.status;
  }
}

function executionOf(t: TaskRecord): TaskRowView["execution"] {
  const state = t.status === "queued" ? "queued" : t.status === "running" ? "running" : "finished";
  return { state, ...(t.lastEventAt !== undefined ? { lastActivityAt: t.lastEventAt } : {}) };
}

export function taskRowView(t: TaskRecord): TaskRowView {
  return {
    taskId: t.taskId,
    runtime: t.runtime,
    deliveryStatus: t.deliveryStatus,
    execution: executionOf(t),
    status: modelStatus(t),
    ...(t.label ? { label: t.label } : {}),
    ...(t.terminalSummary ? { terminalSummary: t.terminalSummary } : {}),
    ...(t.terminalOutcome ? { terminalOutcome: t.terminalOutcome } : {}),
    ...(t.error ? { error: cut(t.error, ERROR_PREVIEW_CHARS) } : {}),
  };
}

const DISPLAY: Record<TaskRecord["status"], string> = {
  queued: "queued",
  running: "running",
  succeeded: "done",
  failed: "failed",
  lost: "failed",
  cancelled: "killed",
  timed_out: "timeout",
};

const waitingOn = (n: number) => `waiting on ${n} ${n === 1 ? "child" : "children"}`;

/** Active (open, or with open descendants) and recent (ended within `sinceMs`) sub-agent runs, numbered across both. */
export function runViews(tasks: TreeTask[], sinceMs: number, now: number): { active: RunView[]; recent: RunView[] } {
  const open = new Map<string, number>();
  for (const t of tasks)
    if (!isTerminalTask(t.status)) open.set(t.requesterSessionKey, (open.get(t.requesterSessionKey) ?? 0) + 1);
  const subagent = tasks.filter((t) => t.runtime === "subagent" && t.childSessionKey);
  const view = (t: TreeTask): Omit<RunView, "index"> => {
    const pending = open.get(t.childSessionKey!) ?? 0;
    const startedAt = t.startedAt ?? t.createdAt;
    const runtimeMs = Math.max(0, (t.endedAt ?? now) - startedAt);
    const base = DISPLAY[t.status];
    const status = pending > 0 ? `${isTerminalTask(t.status) ? base : "active"} (${waitingOn(pending)})` : base;
    return {
      runId: t.runId ?? "",
      sessionKey: t.childSessionKey!,
      label: cut(t.label || t.task, LABEL_CHARS),
      task: cut(t.task, TASK_CHARS),
      status,
      execution: executionOf(t),
      deliveryStatus: t.deliveryStatus,
      pendingDescendants: pending,
      runtime: formatDuration(runtimeMs),
      runtimeMs,
      model: t.model ?? "unknown",
      totalTokens: t.totalTokens ?? 0,
      startedAt,
      ...(t.endedAt !== undefined ? { endedAt: t.endedAt } : {}),
    };
  };
  const newestStart = (a: TreeTask, b: TreeTask) => (b.startedAt ?? b.createdAt) - (a.startedAt ?? a.createdAt);
  const activeTasks = subagent
    .filter((t) => !isTerminalTask(t.status) || (open.get(t.childSessionKey!) ?? 0) > 0)
    .sort(newestStart);
  const recentTasks = subagent.filter((t) => !activeTasks.includes(t) && (t.endedAt ?? 0) >= sinceMs).sort(newestStart);
  let index = 0;
  const active = activeTasks.map((t) => ({ index: ++index, ...view(t) }));
  const recent = recentTasks.map((t) => ({ index: ++index, ...view(t) }));
  return { active, recent };
}

function line(v: RunView): string {
  const tokens = v.totalTokens > 0 ? `, tokens ${formatTokenCount(v.totalTokens)}` : "";
  const task = v.task && v.task !== v.label ? ` - ${v.task}` : "";
  return `${v.index}. ${v.label} (${v.model}, ${v.runtime}${tokens}) ${v.status}${task}`;
}

/** The plain listing: `active subagents:` then `recent (last <N>m):`, each `(none)` when empty. */
export function listText(active: RunView[], recent: RunView[], recentMinutes: number): string {
  const section = (views: RunView[]) => (views.length > 0 ? views.map(line) : ["(none)"]);
  return ["active subagents:", ...section(active), "", `recent (last ${recentMinutes}m):`, ...section(recent)].join(
    "\n",
  );
}

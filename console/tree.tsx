// The "Sub-agents" tab: the session's sub-agent tree (GET /v1/sessions/{key}/tree) drawn as a picture —
// one box per session, its children to its right — with each child's status, run time, tokens and cost,
// and under it the session's ledger tasks (tasks.tsx).
// Live from the session's event stream: a child's status and times come from its task in this session's
// ledger, which the stream's `task` events keep current (session-data.ts), and every task, run or message
// event reads the tree again for the figures the index holds (tokens, cost, deeper levels). Only what this
// session's stream cannot carry is polled, every few seconds: a grandchild (or deeper) that still runs — its
// task lives in its own parent's ledger — or any running child while the stream is down. A running child's
// time counts up meanwhile.
import { useEffect, useState } from "preact/hooks";
import { api, enc } from "./api";
import { ErrorLine } from "./errors";
import { Picture } from "./picture";
import { sessionHref } from "./router";
import type { SessionData } from "./session-data";
import { TasksTable } from "./tasks";
import type { SessionTree, Task, TreeNode } from "./types";
import { useRead } from "./use-read";

/** While a node the stream cannot follow runs, the tree is read again this often (one request per interval). */
const REFRESH_MS = 5000;
const BOX_W = 230;
const BOX_H = 62;
const COL = 270;
const ROW = 78;
const PAD = 10;

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function formatTokens(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)}k tok` : `${n} tok`;
}

const formatCost = (usd: number) => (usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`);

/** A key as a box can hold it: the label, else the key's tail (`subagent 2b7c91e0`). */
function nameOf(n: TreeNode): string {
  if (n.label) return n.label;
  const sub = /:subagent:([0-9a-f]{8})/.exec(n.key);
  return sub ? `${n.agentId} · subagent ${sub[1]}` : n.key;
}

function runTime(n: TreeNode, now: number): number | undefined {
  if (n.runtimeMs !== undefined && n.status !== "running") return n.runtimeMs;
  if (n.startedAt !== undefined) return (n.endedAt ?? now) - n.startedAt;
  return n.runtimeMs;
}

/** A task's status in the tree's words (the index's `status` of a sub-agent session). */
const NODE_STATUS: Record<string, string> = {
  queued: "queued",
  running: "running",
  succeeded: "done",
  failed: "failed",
  timed_out: "timeout",
  cancelled: "killed",
  lost: "lost",
};

/** A child's box as its task in this session's ledger has it now: the ledger moves first, the index follows. */
function withTask(n: TreeNode, task: Task | undefined): TreeNode {
  if (!task || n.depth !== 1) return n;
  return {
    ...n,
    status: NODE_STATUS[task.status] ?? n.status,
    ...(task.startedAt !== undefined ? { startedAt: task.startedAt } : {}),
    ...(task.endedAt !== undefined ? { endedAt: task.endedAt, runtimeMs: undefined } : {}),
  };
}

/** Depth-first order (each child right under its parent), so the rows read like an outline. */
function outline(nodes: TreeNode[]): TreeNode[] {
  const children = new Map<string | null, TreeNode[]>();
  for (const n of nodes) children.set(n.parentKey, [...(children.get(n.parentKey) ?? []), n]);
  const out: TreeNode[] = [];
  const visit = (n: TreeNode) => {
    out.push(n);
    for (const c of children.get(n.key) ?? []) visit(c);
  };
  for (const root of children.get(null) ?? []) visit(root);
  return out;
}

export function SubagentsTab(props: { sessionKey: string; data: SessionData }) {
  return (
    <>
      <TreePicture sessionKey={props.sessionKey} data={props.data} />
      <TasksTable data={props.data} />
    </>
  );
}

function TreePicture(props: { sessionKey: string; data: SessionData }) {
  const [now, setNow] = useState(Date.now());
  const { tasks } = props.data.tasks;
  // Something happened in the session (a message, a run, a task): its children may have changed too.
  const version = [
    props.data.messages.length,
    props.data.runs.map((r) => r.status).join(","),
    tasks.map((t) => `${t.status}:${t.deliveryStatus}`).join(","),
  ].join(":");
  const [polled, setPolled] = useState(false);
  const [running, setRunning] = useState(false);
  const { value: read, error } = useRead(
    () => api<SessionTree>("GET", `/v1/sessions/${enc(props.sessionKey)}/tree`),
    [props.sessionKey, version],
    polled ? REFRESH_MS : undefined,
  );
  const byChild = new Map(tasks.flatMap((t) => (t.childSessionKey ? [[t.childSessionKey, t] as const] : [])));
  const tree = read && { ...read, nodes: read.nodes.map((n) => withTask(n, byChild.get(n.key))) };
  const live = props.data.stream === "live";
  const needsPoll = tree?.nodes.some((n) => n.status === "running" && (n.depth > 1 || !live)) ?? false;
  if (needsPoll !== polled) setPolled(needsPoll);
  const anyRunning = tree?.nodes.some((n) => n.status === "running") ?? false;
  if (anyRunning !== running) setRunning(anyRunning);

  useEffect(() => {
    if (!running) return;
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(tick);
  }, [running]);

  if (!tree) return <ErrorLine error={error} />;
  const rows = outline(tree.nodes);
  if (rows.length <= 1) return <p>No sub-agents spawned from this session.</p>;
  const y = new Map(rows.map((n, i) => [n.key, PAD + i * ROW]));
  const x = (n: TreeNode) => PAD + n.depth * COL;
  const depth = Math.max(...rows.map((n) => n.depth));
  const width = PAD * 2 + depth * COL + BOX_W;
  const height = PAD * 2 + (rows.length - 1) * ROW + BOX_H;
  const children = rows.length - 1;
  return (
    <>
      <ErrorLine error={error} />
      <Picture
        kind="tree"
        width={width}
        height={height}
        label={`Sub-agent tree of ${props.sessionKey}: ${children} sub-agent${children === 1 ? "" : "s"}`}
        testId="subagent-tree"
      >
        {rows.map((n) => {
          const parent = n.parentKey === null ? undefined : rows.find((p) => p.key === n.parentKey);
          if (!parent) return null;
          const px = x(parent) + 16;
          const py = (y.get(parent.key) ?? 0) + BOX_H;
          const cy = (y.get(n.key) ?? 0) + BOX_H / 2;
          return <path key={`e-${n.key}`} class="edge" d={`M${px},${py} V${cy} H${x(n)}`} />;
        })}
        {rows.map((n) => {
          const top = y.get(n.key) ?? 0;
          const time = runTime(n, now);
          const facts = [
            n.depth === 0 ? "this session" : (n.status ?? "—"),
            time === undefined ? null : formatDuration(time),
            formatTokens(n.totalTokens),
            n.costUsd === null ? null : formatCost(n.costUsd),
          ].filter(Boolean);
          return (
            <a key={n.key} href={sessionHref(n.key, n.depth === 0 ? "transcript" : "subagents")}>
              <g
                class={`node node-${n.depth === 0 ? "root" : (n.status ?? "unknown")}`}
                transform={`translate(${x(n)},${top})`}
                data-node={n.key}
                data-status={n.status ?? ""}
              >
                <title>{`${n.key}${n.model ? ` · ${n.model}` : ""}`}</title>
                <rect width={BOX_W} height={BOX_H} rx={8} />
                <text x={12} y={24} class="name">
                  {nameOf(n)}
                </text>
                <text x={12} y={46} class="facts">
                  {facts.join(" · ")}
                </text>
              </g>
            </a>
          );
        })}
      </Picture>
      {tree.truncated && <p class="meta">Only part of the tree is shown (5 levels, 200 sessions at most).</p>}
    </>
  );
}

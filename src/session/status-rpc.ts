import { type StateChanges, stateSince } from "../events/state-log";
import { CHILD_FLOW } from "../spawn/child-slots";
import { assertOpen } from "./closing";
import { type DeliveryContext, deliveryContextOf } from "./delivery-context";
import type { SessionExtension } from "./extensions";
import type { SessionHost } from "./host";
import type { DeliveryRoute, SessionMeta, TranscriptMessage } from "./types";

/**
 * What `session_status` reads of one session (src/tools/session-status.ts), and its model override, in
 * one round trip. Every read is a seek or a bounded range of an index (runs_queue, flows_kind_state_updated,
 * the newest messages, events_state), so a status costs the same for a session of any age.
 */

/** The newest messages searched for the last model step's prompt size (the context in use). */
const CONTEXT_LOOKBACK_MESSAGES = 200;

export interface StatusFacts {
  key: string;
  agentId: string;
  sessionId: string;
  createdAt: number;
  updatedAt: number;
  label?: string;
  modelOverride?: string;
  /** `<provider>/<model>` of the last run, if any ran. */
  lastModel?: string;
  contextWindow?: number;
  /** Prompt tokens of the newest model step: the context in use. */
  contextUsed?: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  thinkingLevel?: string;
  verboseLevel?: string;
  sendPolicy?: string;
  spawnedBy?: string;
  spawnDepth?: number;
  subagentStatus?: string;
  /** The session's persisted delivery route (where its replies go), as a sessions_list row shows it. */
  deliveryContext?: DeliveryContext;
  running?: { runId: string; kind: string; startedAt?: number };
  /** The running run's own route (an inbound channel message's), only while it runs: OpenClaw's `active`. */
  active?: DeliveryContext;
  queued: number;
  children: { running: number; ended: number };
  compactions: number;
  abortedLastRun: boolean;
  stateVersion: number;
  stateChanges?: StateChanges;
  changedModel: boolean;
}

export interface StatusRequest {
  changesSince?: number;
  /** A new override (already checked by the caller), or null to clear it; absent: leave it. */
  setModel?: string | null;
  /** The caller may read this session only as its parent: checked before anything is read or changed. */
  onlyIfSpawnedBy?: string;
}

export type StatusAnswer = StatusFacts | { denied: true } | { missing: true };

async function status(host: SessionHost, req: StatusRequest): Promise<StatusAnswer> {
  if (req.onlyIfSpawnedBy !== undefined && host.meta?.spawnedBy !== req.onlyIfSpawnedBy) return { denied: true };
  // A session that was never written (or was deleted) is unknown; reading it must not create it.
  if (!host.hasStorage || !host.meta) return { missing: true };
  let changedModel = false;
  if (req.setModel !== undefined) {
    // A session being deleted or archived takes no change (409), as a PATCH would not (closing.ts).
    assertOpen(host, host.key);
    const m = host.meta;
    const next = req.setModel ?? undefined;
    if (m.modelOverride !== next) {
      // The next run reads the override from meta (src/runners/builtin-run.ts, webhook-runner.ts).
      host.storage.transactionSync(() => {
        if (next === undefined) delete m.modelOverride;
        else m.modelOverride = next;
        m.updatedAt = Date.now();
        host.saveMeta();
      });
      changedModel = true;
      // The registry row shows the model too, as after a PATCH (src/http/routes/sessions.ts).
      await host.markIndexDirty({ immediate: true });
    }
  }
  return { ...facts(host, host.meta), changedModel, ...stateSince(host.sql, req.changesSince) };
}

function facts(host: SessionHost, m: SessionMeta): Omit<StatusFacts, "changedModel" | "stateVersion"> {
  const sql = host.sql;
  const running = sql
    .exec<{ id: string; kind: string; started_at: number | null; route: string | null }>(
      // Only the route of the input, not the input (a message may be 512 KiB).
      "SELECT id, kind, started_at, json_extract(input_json, '$.route') AS route FROM runs WHERE status = 'running' LIMIT 1",
    )
    .toArray()[0];
  const queued = sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM runs WHERE status = 'queued'").one().n;
  const children = { running: 0, ended: 0 };
  for (const r of sql.exec<{ state: string; n: number }>(
    "SELECT state, COUNT(*) AS n FROM flows WHERE kind = ? AND state IN ('running', 'ended') GROUP BY state",
    CHILD_FLOW,
  ))
    children[r.state as "running" | "ended"] = r.n;
  // Ids count up from 1 and only the newest few rows are kept (src/compaction/store.ts): the largest is the total.
  const compactions = sql.exec<{ n: number | null }>("SELECT MAX(id) AS n FROM compactions").one().n ?? 0;
  const out: Omit<StatusFacts, "changedModel" | "stateVersion"> = {
    key: m.key,
    agentId: m.agentId,
    sessionId: m.sessionId,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    inputTokens: m.inputTokens,
    outputTokens: m.outputTokens,
    totalTokens: m.totalTokens,
    queued,
    children,
    compactions,
    abortedLastRun: m.abortedLastRun,
  };
  if (m.label) out.label = m.label;
  if (m.modelOverride) out.modelOverride = m.modelOverride;
  if (m.model) out.lastModel = m.modelProvider ? `${m.modelProvider}/${m.model}` : m.model;
  if (m.contextTokens !== undefined) out.contextWindow = m.contextTokens;
  const used = contextUsed(sql);
  if (used !== undefined) out.contextUsed = used;
  if (m.thinkingLevel) out.thinkingLevel = m.thinkingLevel;
  if (m.verboseLevel) out.verboseLevel = m.verboseLevel;
  if (m.sendPolicy) out.sendPolicy = m.sendPolicy;
  if (m.spawnedBy) out.spawnedBy = m.spawnedBy;
  if (m.spawnDepth !== undefined) out.spawnDepth = m.spawnDepth;
  if (m.subagent?.status) out.subagentStatus = m.subagent.status;
  const route = deliveryContextOf(m);
  if (route) out.deliveryContext = route;
  const active = running?.route ? routeOf(JSON.parse(running.route) as DeliveryRoute) : undefined;
  if (active) out.active = active;
  if (running)
    out.running = {
      runId: running.id,
      kind: running.kind,
      ...(running.started_at !== null ? { startedAt: running.started_at } : {}),
    };
  return out;
}

/** A run's route in deliveryContext's shape (ids as strings, empty parts left out). */
function routeOf(r: DeliveryRoute): DeliveryContext | undefined {
  if (!r.channel) return undefined;
  return {
    channel: r.channel,
    ...(r.to ? { to: r.to } : {}),
    ...(r.accountId ? { accountId: r.accountId } : {}),
    ...(r.threadId != null && r.threadId !== "" ? { threadId: String(r.threadId) } : {}),
  };
}

/** Prompt tokens of the newest model step among the last CONTEXT_LOOKBACK_MESSAGES messages. */
function contextUsed(sql: SqlStorage): number | undefined {
  const row = sql
    .exec<{ json: string }>(
      "SELECT json FROM messages WHERE role = 'assistant' AND seq > (SELECT COALESCE(MAX(seq), 0) FROM messages) - ? ORDER BY seq DESC LIMIT 1",
      CONTEXT_LOOKBACK_MESSAGES,
    )
    .toArray()[0];
  if (!row) return undefined;
  const m = JSON.parse(row.json) as TranscriptMessage;
  return m.role === "assistant" && m.usage ? m.usage.input + m.usage.cacheRead : undefined;
}

const statusRpc = { read: status };

declare module "./extensions" {
  interface ExtensionRpc {
    status: typeof statusRpc;
  }
}

/** session_status over RPC: the facts of the card, the model override, the state log (docs/events.md). */
export const sessionStatusExtension: SessionExtension = { name: "status", rpc: statusRpc };

import { deriveChannel, displayKey, type ParsedKey, type SessionKind } from "../keys";
import { deliveryContextOf } from "../session/delivery-context";
import type { SessionMeta } from "../session/types";
import type { SessionRow } from "./row-schema";

export type { SessionRow } from "./row-schema";

/** What the registry indexes: the row plus the columns its queries filter on. */
export interface IndexEntry {
  key: string;
  agentId: string;
  sessionId: string;
  kind: SessionKind;
  label: string | null;
  spawnedBy: string | null;
  updatedAt: number;
  /** Isolated cron run sessions and reserved keys are indexed (for resolution) but never listed. */
  listed: boolean;
  row: SessionRow;
}

export function transcriptPathOf(key: string): string {
  return `/v1/sessions/${encodeURIComponent(key)}/transcript.jsonl`;
}

export function buildRow(meta: SessionMeta, parsed: ParsedKey): SessionRow {
  const sub = meta.subagent;
  const row: SessionRow = {
    key: displayKey(meta.key),
    agentId: meta.agentId,
    kind: parsed.kind,
    channel: deriveChannel(parsed, { channel: meta.channel, lastChannel: meta.lastChannel }),
    displayName: meta.displayName ?? meta.label,
    label: meta.label,
    updatedAt: meta.updatedAt,
    sessionId: meta.sessionId,
    model: meta.model ?? meta.modelOverride,
    contextTokens: meta.contextTokens,
    totalTokens: meta.totalTokens,
    inputTokens: meta.inputTokens,
    outputTokens: meta.outputTokens,
    thinkingLevel: meta.thinkingLevel,
    verboseLevel: meta.verboseLevel,
    systemSent: meta.systemSent,
    abortedLastRun: meta.abortedLastRun,
    sendPolicy: meta.sendPolicy,
    lastChannel: meta.lastChannel,
    lastTo: meta.lastTo,
    deliveryContext: deliveryContextOf(meta),
    transcriptPath: transcriptPathOf(displayKey(meta.key)),
    spawnedBy: meta.spawnedBy === undefined ? undefined : displayKey(meta.spawnedBy),
    spawnDepth: meta.spawnDepth,
  };
  if (sub?.status) {
    row.status = sub.status;
    row.startedAt = sub.startedAt;
    row.endedAt = sub.endedAt;
    if (sub.startedAt && sub.endedAt) row.runtimeMs = sub.endedAt - sub.startedAt;
  }
  // Drop undefined fields so rows serialise compactly and compare cleanly.
  for (const k of Object.keys(row) as (keyof SessionRow)[]) if (row[k] === undefined) delete row[k];
  return row;
}

export function indexEntryOf(meta: SessionMeta, parsed: ParsedKey): IndexEntry {
  return {
    key: meta.key,
    agentId: meta.agentId,
    sessionId: meta.sessionId,
    kind: parsed.kind,
    label: meta.label ?? null,
    spawnedBy: meta.spawnedBy ?? null,
    updatedAt: meta.updatedAt,
    listed: !parsed.isCronRun,
    row: buildRow(meta, parsed),
  };
}

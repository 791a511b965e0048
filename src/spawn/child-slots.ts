import { getFlowRow, moveFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { resumeDeferredAnnounces } from "./announce-flow";
import type { ChildFinding, ChildOutcome } from "./announce-format";
import { CHILD_FLOW, childFlowId } from "./child-slot-rows";
import { yieldPending } from "./yield-rows";
import { settleBatchesOf } from "./yield-settle";

/**
 * A requester's active-children slots (one `subagent_child` flow row per child): reserved before a
 * child is created, so concurrent spawns never exceed `maxChildrenPerAgent`, and ended once the
 * child's completion has been absorbed by the requester. Each ended slot keeps the child's outcome,
 * so a requester that is itself a sub-agent can report all its direct children (test/spawn/subagent-descendants.test.ts).
 * Everything here is synchronous: it runs inside the caller's transaction.
 */

export { CHILD_FLOW, childFlowId } from "./child-slot-rows";
/** Re-checks a running slot whose child may never have been created (crash between reserve and spawn) or was deleted. */
export const SLOT_TIMER = "subagent-slot";

/** Number of this session's children still holding a slot. */
export function countActiveChildren(host: SessionHost): number {
  if (!host.meta) return 0;
  return host.sql
    .exec<{ n: number }>("SELECT COUNT(*) AS n FROM flows WHERE kind = ? AND state = 'running'", CHILD_FLOW)
    .one().n;
}

/**
 * End a child's slot. `outcome` is what it announced; a slot released without one (the child was
 * deleted or never created) is marked `gone` and left out of its parent's results.
 */
export function releaseSlotSync(host: SessionHost, childKey: string, outcome?: ChildOutcome): void {
  const id = childFlowId(childKey);
  const row = getFlowRow<{ childKey: string; label?: string }>(host.sql, id, CHILD_FLOW);
  host.timers.clear(SLOT_TIMER, childKey);
  if (row?.state !== "running") return;
  moveFlowRow(host.sql, id, outcome ? "ended" : "gone", { data: { ...row.data, ...(outcome ? { outcome } : {}) } });
  // The last child of a waiting yield batch: it settles in this transaction (its resume turn is due now).
  settleBatchesOf(host, childKey);
  resumeDeferredAnnouncesIfIdle(host);
}

/**
 * No child runs any more: an announce this session (a sub-agent) deferred for its descendants goes out now —
 * unless a yield still owes its resume turn, whose answer the announce reports (src/spawn/yield-batch.ts calls
 * this again when that turn ends or the batch gives up). The one place this rule is written; a session with
 * no deferred announce (any non-sub-agent) has nothing to resume. Inside the caller's transaction.
 */
export function resumeDeferredAnnouncesIfIdle(host: SessionHost): void {
  if (countActiveChildren(host) === 0 && !yieldPending(host)) resumeDeferredAnnounces(host);
}

/**
 * This session's direct children spawned in [fromMs, toMs], in creation order, with their outcomes.
 * Children whose slot ended without a result (deleted, never created) are left out: there is nothing
 * of theirs to report, and a child spawned by an earlier run is not this run's work.
 */
export function directChildResults(host: SessionHost, fromMs: number, toMs: number): ChildFinding[] {
  return host.sql
    .exec<{ state: string; json: string }>(
      "SELECT state, json FROM flows WHERE kind = ? AND state IN ('running', 'ended') AND created_at >= ? AND created_at <= ? ORDER BY created_at, rowid",
      CHILD_FLOW,
      fromMs,
      toMs,
    )
    .toArray()
    .map((r) => {
      const j = JSON.parse(r.json) as { childKey: string; label?: string; outcome?: ChildOutcome };
      return {
        childKey: j.childKey,
        ...(j.label ? { label: j.label } : {}),
        outcome: r.state === "ended" ? (j.outcome ?? null) : null,
      };
    });
}

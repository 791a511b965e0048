import { moveFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { CHILD_FLOW, childFlowId, childKeyOfFlowId } from "./child-slot-rows";
import { openBatches, type YieldBatch } from "./yield-rows";

/**
 * When a yielded batch stops waiting (docs/subagents.md, "sessions_yield"): in the transaction that ends
 * its last child's slot — every slot ends through `releaseSlotSync` (src/spawn/child-slots.ts), by an
 * announce, a completion turn, or the slot check that finds a child gone — or when its give-up timer fires.
 * Nothing polls: a batch waits on its children's slot rows and its one deadline.
 */

export const YIELD_TIMER = "subagent-yield";
/**
 * The give-up is a timer row of its own (ref `<batch>:give-up`), so the deadline is where every deadline is
 * (docs/timers.md) and an operator sees it; the batch's own row (ref `<batch>`) starts the resume turn.
 */
export const GIVE_UP = ":give-up";

/** Slot ids of the batch's children (`child:<key>`). */
export const slotIds = (b: YieldBatch) => JSON.stringify(b.children.map(childFlowId));

function runningChildren(host: SessionHost, b: YieldBatch): string[] {
  return host.sql
    .exec<{ id: string }>(
      "SELECT id FROM flows WHERE kind = ? AND state = 'running' AND id IN (SELECT value FROM json_each(?))",
      CHILD_FLOW,
      slotIds(b),
    )
    .toArray()
    .map((r) => childKeyOfFlowId(r.id));
}

/** A waiting batch whose children all ended (or whose wait gave up) is settled; its resume timer is due now. */
export function settleIfReady(host: SessionHost, id: string, b: YieldBatch, now: number, giveUp: boolean): boolean {
  const running = runningChildren(host, b);
  if (running.length > 0 && !giveUp) return false;
  const data: YieldBatch = { ...b, ...(running.length > 0 ? { missing: running } : {}) };
  moveFlowRow(host.sql, id, "settled", { data, from: "waiting", now });
  host.timers.clear(YIELD_TIMER, id + GIVE_UP);
  host.timers.set(YIELD_TIMER, id, now);
  return true;
}

/** Inside the transaction that ended `childKey`'s slot: the waiting batches it belongs to settle if it was the last. */
export function settleBatchesOf(host: SessionHost, childKey: string): void {
  const now = Date.now();
  for (const b of openBatches(host))
    if (b.state === "waiting" && b.batch.children.includes(childKey)) settleIfReady(host, b.id, b.batch, now, false);
}

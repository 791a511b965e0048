/**
 * The names of a requester's child-slot rows (src/spawn/child-slots.ts), apart from their logic so that the
 * yield batch's settlement (yield-settle.ts), which the slot release calls, can read them without an import
 * cycle (scripts/check-cycles.mjs).
 */
export const CHILD_FLOW = "subagent_child";

export const childFlowId = (childKey: string) => `child:${childKey}`;

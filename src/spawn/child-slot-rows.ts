/**
 * The names of a requester's child-slot rows (src/spawn/child-slots.ts), apart from their logic so that the
 * yield batch's settlement (yield-settle.ts), which the slot release calls, can read them without an import
 * cycle (scripts/check-cycles.mjs).
 */
export const CHILD_FLOW = "subagent_child";

const CHILD_ID_PREFIX = "child:";
export const childFlowId = (childKey: string) => `${CHILD_ID_PREFIX}${childKey}`;
/** The child key a slot row's id names (the inverse of childFlowId). */
export const childKeyOfFlowId = (id: string) => id.slice(CHILD_ID_PREFIX.length);

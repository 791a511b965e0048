/**
 * The control tokens of the follow-up steps and the first line of each step's system prompt. They live
 * apart from the flows so the built-in echo model (src/runners/builtin-models.ts) can recognise a step
 * without importing the flows (which import the session object).
 */
export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
export const NO_REPLY = "NO_REPLY";

export const A2A_REPLY_STEP_HEADER = "Agent-to-agent reply step:";
export const A2A_ANNOUNCE_STEP_HEADER = "Agent-to-agent announce step:";
export const SUBAGENT_ANNOUNCE_STEP_HEADER = "Sub-agent announce step:";

/**
 * The control tokens of the follow-up steps and the first line of each step's system prompt. They live
 * apart from the flows so the built-in echo model (src/runners/builtin-models.ts) can recognise a step
 * without importing the flows (which import the session object).
 */
export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";
export const NO_REPLY = "NO_REPLY";
/** OpenClaw's heartbeat acknowledgement: like NO_REPLY, nothing for anyone to read. */
export const HEARTBEAT_OK = "HEARTBEAT_OK";

const SILENT_REPLY = /^(NO_REPLY|HEARTBEAT_OK)(\s+(NO_REPLY|HEARTBEAT_OK))*$/i;

/**
 * A reply that says nothing: NO_REPLY (or HEARTBEAT_OK), as OpenClaw recognises it in the agent-to-agent
 * flow — any case, repeated, with punctuation or whitespace around it (`"no_reply."`). Such a reply is
 * never forwarded as the next ping-pong message nor posted as an announce (src/send/a2a-steps.ts).
 */
export function isSilentReply(text: string): boolean {
  return SILENT_REPLY.test(text.trim().replace(/^[^\p{L}\p{N}_]+|[^\p{L}\p{N}_]+$/gu, ""));
}

export const A2A_REPLY_STEP_HEADER = "Agent-to-agent reply step:";
export const A2A_ANNOUNCE_STEP_HEADER = "Agent-to-agent announce step:";
export const SUBAGENT_ANNOUNCE_STEP_HEADER = "Sub-agent announce step:";
export const COMPACTION_STEP_HEADER = "Compaction summary step:";

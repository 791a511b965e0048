import { displayKey } from "../keys";
import type { FlowState } from "./a2a-state";
import { A2A_ANNOUNCE_STEP_HEADER, A2A_REPLY_STEP_HEADER, ANNOUNCE_SKIP, REPLY_SKIP } from "./control-tokens";

/** The texts of the agent-to-agent flow (src/send/a2a-flow.ts): its context and step prompts (OpenClaw's exact lines). */

export const ANNOUNCE_STEP_MESSAGE = "Agent-to-agent announce step.";

export function messageContextPrompt(p: {
  requesterKey?: string;
  requesterChannel?: string;
  targetDisplayKey: string;
}): string {
  return [
    "Agent-to-agent message context:",
    p.requesterKey ? `Agent 1 (requester) session: ${displayKey(p.requesterKey)}.` : null,
    p.requesterChannel ? `Agent 1 (requester) channel: ${p.requesterChannel}.` : null,
    `Agent 2 (target) session: ${p.targetDisplayKey}.`,
  ]
    .filter((l): l is string => l !== null)
    .join("\n");
}

function flowLines(f: FlowState): string[] {
  return [
    f.requesterKey ? `Agent 1 (requester) session: ${displayKey(f.requesterKey)}.` : null,
    f.requesterChannel ? `Agent 1 (requester) channel: ${f.requesterChannel}.` : null,
    `Agent 2 (target) session: ${f.targetDisplayKey}.`,
    `Agent 2 (target) channel: ${f.targetChannel}.`,
  ].filter((l): l is string => l !== null);
}

export function replyStepPrompt(f: FlowState, turn: number): string {
  const requesterSpeaks = turn % 2 === 1;
  return [
    A2A_REPLY_STEP_HEADER,
    `Current agent: ${requesterSpeaks ? "Agent 1 (requester)" : "Agent 2 (target)"}.`,
    `Turn ${turn} of ${f.maxTurns}.`,
    ...flowLines(f),
    `If you want to stop the ping-pong, reply exactly "${REPLY_SKIP}".`,
  ].join("\n");
}

export function announceStepPrompt(f: FlowState): string {
  return [
    A2A_ANNOUNCE_STEP_HEADER,
    ...flowLines(f),
    `Original request: ${f.originalMessage}`,
    f.roundOneReply ? `Round 1 reply: ${f.roundOneReply}` : "Round 1 reply: (not available).",
    f.latestReply ? `Latest reply: ${f.latestReply}` : "Latest reply: (not available).",
    `If you want to remain silent, reply exactly "${ANNOUNCE_SKIP}".`,
    "Any other reply will be posted to the target channel.",
    "After this reply, the agent-to-agent conversation is over.",
  ].join("\n");
}

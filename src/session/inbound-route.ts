import type { EnqueueRequest, SessionMeta } from "./types";

/**
 * Record where a session's replies go from an inbound message's route. Only real inbound channel
 * traffic sets the delivery route; inter-session turns never overwrite it (OpenClaw #54441; test/send/a2a-flow.test.ts).
 */
export function recordInboundRoute(m: SessionMeta, input: EnqueueRequest["input"]): void {
  const route = input.route;
  if (!route || (input.kind !== "inbound" && input.kind !== "command") || input.provenance?.kind === "inter_session")
    return;
  m.lastChannel = route.channel;
  if (route.to != null) m.lastTo = route.to;
  if (route.accountId != null) m.lastAccountId = route.accountId;
  if (route.threadId != null) m.lastThreadId = String(route.threadId);
  if (route.displayName) m.displayName = route.displayName;
  if (m.kind === "group" && !m.channel) m.channel = route.channel;
  if (route.chatType) m.chatType = route.chatType;
}

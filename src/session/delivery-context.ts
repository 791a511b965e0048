import type { SessionMeta } from "./types";

/** Where a session's replies are delivered: its last route, as sessions_list rows and session_status show it. */
export interface DeliveryContext {
  channel: string;
  to?: string;
  accountId?: string;
  threadId?: string;
}

/**
 * The session's persisted delivery route, built from its meta's `last*` fields in one place, so the registry
 * row (src/registry/row.ts) and the status card's details (src/session/status-rpc.ts) always agree. None
 * until the session has a channel.
 */
export function deliveryContextOf(meta: SessionMeta): DeliveryContext | undefined {
  if (!meta.lastChannel) return undefined;
  return {
    channel: meta.lastChannel,
    ...(meta.lastTo ? { to: meta.lastTo } : {}),
    ...(meta.lastAccountId ? { accountId: meta.lastAccountId } : {}),
    ...(meta.lastThreadId ? { threadId: meta.lastThreadId } : {}),
  };
}

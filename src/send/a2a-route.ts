import { routeOf } from "../channels/outbox";
import { type ParsedKey, parseCanonical } from "../keys";
import type { SessionHost } from "../session/host";
import type { DeliveryRoute, SessionMeta } from "../session/types";

// Where a flow's announce is delivered (without OpenClaw's list scan).

/**
 * Where the target's announce goes: the route recorded from the session's own inbound traffic,
 * else the one its key names (`<channel>:group|channel:<id>` → `to: "group:<id>"`). Never guessed
 * by scanning other sessions.
 */
export function announceRoute(host: SessionHost): DeliveryRoute | null {
  return announceRouteOf(host.meta, parseCanonical(host.key, host.cfg));
}

/** `announceRoute` from a session's metadata and parsed key (sessions_send reads these before the flow exists). */
export function announceRouteOf(meta: SessionMeta | null | undefined, parsed: ParsedKey): DeliveryRoute | null {
  const recorded = routeOf(meta);
  if (recorded) return recorded;
  if (parsed.kind !== "group" || !parsed.channel || !parsed.chatType) return null;
  const parts = parsed.rest.split(":");
  const at = parts.indexOf(parsed.chatType, 1);
  if (at < 0) return null;
  let id = parts.slice(at + 1);
  const threadAt = id.findIndex((p, i) => i > 0 && (p === "thread" || p === "topic"));
  if (threadAt > 0) id = id.slice(0, threadAt);
  return {
    channel: parsed.channel,
    to: `${parsed.chatType}:${id.join(":")}`,
    accountId: null,
    threadId: parsed.threadId ?? null,
  };
}

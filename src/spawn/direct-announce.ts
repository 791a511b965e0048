import { queueDelivery, recordedRoute } from "../channels/outbox";
import type { SessionHost } from "../session/host";
import type { DeliveryRoute, TranscriptMessage } from "../session/types";
import type { ChildOutcome } from "./announce-format";
import type { CompletionEvent } from "./completion-event";

/**
 * What a child hands its requester when its announce is ready, and the direct announce: the
 * normalised `Status/Result/Notes/Stats` text recorded in the requester's transcript and delivered to
 * its route. It is the whole delivery in "direct" mode and the fallback in "requester" mode
 * (requester-turn.ts) when the requester's own turn on the completion fails.
 */

/** Flow rows of received announces, keyed by their idempotency key (`announce:v1:<child>:<run>`). */
export const ANNOUNCE_IN_FLOW = "subagent_announce_in";

/** How a requester hears back from its children (`agents.*.subagents.announceDelivery`). */
export type AnnounceDelivery = "direct" | "requester";

export interface AnnounceHandoff {
  idempotencyKey: string;
  childKey: string;
  childRunId: string;
  /** The formatted announce; null when the announce step chose silence (the slot is still released). */
  message: string | null;
  /** The requester's route captured at spawn, used when the requester has none recorded now. */
  route?: DeliveryRoute | null;
  /** A thread-bound child's thread: the announce is delivered there (test/spawn/thread-binding.test.ts). */
  threadId?: string;
  /** The child's status label and frozen result, kept even when the announce is silent. */
  outcome?: ChildOutcome;
  /** "requester": the requester runs a turn on `event` and its reply is what is delivered. Default "direct". */
  delivery?: AnnounceDelivery;
  /** The completion event of "requester" delivery (set with it). */
  event?: CompletionEvent;
}

export function announceIdempotencyKey(childKey: string, childRunId: string): string {
  return `announce:v1:${childKey}:${childRunId}`;
}

export function internalMessage(text: string, childKey: string): TranscriptMessage {
  return {
    role: "user",
    content: [{ type: "text", text }],
    timestamp: Date.now(),
    provenance: { kind: "internal_system", sourceSessionKey: childKey, sourceTool: "sessions_spawn" },
  };
}

/** Where a child's announce goes: this session's route now, else the spawn-time one; a thread-bound child's thread. */
export function announceRoute(host: SessionHost, h: Pick<AnnounceHandoff, "route" | "threadId">): DeliveryRoute | null {
  const base = recordedRoute(host) ?? (h.route?.channel ? h.route : null);
  return base && h.threadId ? { ...base, threadId: h.threadId } : base;
}

/**
 * Record the direct announce in this transcript and queue its delivery (inside the caller's
 * transaction). Keyed on the announce's idempotency key, so a repeat never delivers twice.
 * No route at all: the announce stays an internal injection, as in OpenClaw.
 */
export function recordDirectAnnounce(
  host: SessionHost,
  h: Pick<AnnounceHandoff, "idempotencyKey" | "childKey" | "route" | "threadId"> & { message: string },
): { id: string; status: string } | undefined {
  host.transcript.append(internalMessage(h.message, h.childKey), null);
  if (host.meta) {
    host.meta.updatedAt = Date.now();
    host.saveMeta();
  }
  const route = announceRoute(host, h);
  return route
    ? queueDelivery(host, { kind: "subagent_announce", route, message: h.message, idempotencyKey: h.idempotencyKey })
    : undefined;
}

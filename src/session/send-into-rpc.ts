import { resolveSendPolicy } from "../policy/send-policy";
import { sendQueuedSync } from "../tasks/send-task";
import type { SessionExtension } from "./extensions";
import type { SessionHost } from "./host";
import type { EnqueueRequest, RunSnapshot, SessionMeta } from "./types";

/** A sessions_send into this session: the checks that need its own state, then the enqueue (src/tools/sessions-send.ts). */
export type SendIntoRequest = {
  req: EnqueueRequest;
  /** Refuse unless this session was spawned by `requesterKey` (a tree/sandboxed caller that is not its parent otherwise). */
  requireChildOf?: string;
};
export type SendIntoResult =
  | { refused: "lineage" | "policy" }
  /** `meta` is the session as it was before this enqueue (null: the send creates it); the caller derives the announce route. */
  | { run: RunSnapshot; meta: SessionMeta | null };

/**
 * One round trip instead of two (docs/scale.md, "Where a send's time goes"): the lineage and send-policy
 * checks read this object's meta in the same call that queues the run, so no other request interleaves
 * between the check and the enqueue, and the caller never reads the meta beforehand.
 */
const sendIntoRpc = {
  enqueue: async (host: SessionHost, arg: SendIntoRequest): Promise<SendIntoResult> => {
    const meta = host.meta ? structuredClone(host.meta) : null;
    const refused = sendRefusal(host, arg.requireChildOf);
    if (refused) return { refused };
    // A send its caller may stop waiting for is tracked from the transaction that queues its run (src/tasks/send-task.ts).
    return { run: await host.enqueue(arg.req, (h, queued) => sendQueuedSync(h, queued, arg.req.input)), meta };
  },
};

/**
 * The checks a send into this session makes with its own state (every mode of sessions_send: also the
 * steer and notify of src/send/send-modes.ts): its lineage when only a parent may send, then its send policy.
 */
export function sendRefusal(host: SessionHost, requireChildOf: string | undefined): "lineage" | "policy" | null {
  const meta = host.meta;
  if (requireChildOf !== undefined && meta?.spawnedBy !== requireChildOf) return "lineage";
  const policy = resolveSendPolicy({
    policy: host.cfg.session.sendPolicy,
    override: meta?.sendPolicy,
    sessionKey: host.key,
    channel: meta?.channel ?? meta?.lastChannel,
    chatType: meta?.chatType,
  });
  return policy === "deny" ? "policy" : null;
}

declare module "./extensions" {
  interface ExtensionRpc {
    "send-into": typeof sendIntoRpc;
  }
}

/** sessions_send's target checks and enqueue in one call. */
export const sendIntoExtension: SessionExtension = { name: "send-into", rpc: sendIntoRpc };

import { fromRpcError, SwitchboardError } from "../errors";
import { log } from "../log";
import { callExtension, type SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { DeliveryRoute, EnqueueRequest, RunSnapshot } from "../session/types";

/**
 * Thread-bound sub-agents (`sessions_spawn` with `thread: true`; test/spawn/thread-binding.test.ts). The spawn binds the
 * thread key `<requester key>:thread:<child uuid>` to the child:
 *  - inbound channel messages posted to that key are run by the child (a follow-up continues in-thread);
 *  - the child's announces and its replies to those follow-ups are delivered with `threadId` = the uuid,
 *    so the channel integration opens or reuses that thread.
 * The binding lives in the thread key's own object, in its key-value storage (no session is created
 * there): only objects whose key names a thread look it up, so other inbound traffic pays nothing.
 * It is removed when the child is deleted or archived, after which the thread key is an ordinary session.
 */

export const THREAD_EXTENSION = "thread-binding" as const;
const BINDING = "thread-binding";

export interface ThreadBinding {
  childKey: string;
  threadKey: string;
  /** The requester's route with the bound thread id: where follow-up replies go when a message brings no route. */
  route: DeliveryRoute & { threadId: string };
}

/** The thread key a child of `requesterKey` is bound to (a requester already in a thread binds a sibling thread). */
export function threadKeyFor(requesterKey: string, childKey: string): { threadKey: string; threadId: string } {
  const threadId = childKey.slice(childKey.lastIndexOf(":") + 1);
  const base = requesterKey.replace(/:(thread|topic):.*$/, "");
  return { threadKey: `${base}:thread:${threadId}`, threadId };
}

function isThreadKey(key: string): boolean {
  return key.includes(":thread:");
}

/**
 * An inbound message to a bound thread key runs in the child. The route defaults to the bound thread,
 * and a route that names the channel but no thread gets the bound thread id, so replies stay in-thread.
 */
function forwardInbound(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> | null {
  if (req.input.kind !== "inbound" || !isThreadKey(host.key)) return null;
  return forwardIfBound(host, req);
}

async function forwardIfBound(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> {
  const binding = await host.storage.get<ThreadBinding>(BINDING);
  if (!binding) return null;
  const given = req.input.route;
  const route = given ? { ...given, threadId: given.threadId ?? binding.route.threadId } : binding.route;
  try {
    // onlyIfExists: a binding whose unbind was lost must not bring a deleted child back as an empty session.
    return await host.bindings.SESSIONS.getByName(binding.childKey).enqueue({
      ...req,
      onlyIfExists: true,
      input: { ...req.input, route },
    });
  } catch (err) {
    const e = fromRpcError(err);
    if (!(e instanceof SwitchboardError && e.type === "not_found")) throw e;
    await host.storage.delete(BINDING);
    return null;
  }
}

const threadRpc = {
  bind: async (host: SessionHost, b: ThreadBinding) => {
    await host.storage.put(BINDING, b);
  },
  /** Only the child that holds the binding releases it (a re-bound thread is left alone). */
  unbind: async (host: SessionHost, childKey: string) => {
    const b = await host.storage.get<ThreadBinding>(BINDING);
    if (b?.childKey === childKey) await host.storage.delete(BINDING);
  },
  get: (host: SessionHost) => host.storage.get<ThreadBinding>(BINDING).then((b) => b ?? null),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "thread-binding": typeof threadRpc;
  }
}

/** thread=true: a thread key whose inbound messages run in the sub-agent bound to it. */
export const threadBindingExtension: SessionExtension = {
  name: THREAD_EXTENSION,
  forwardInbound,
  rpc: threadRpc,
  // A bound child that is deleted or archived frees its thread (best effort: forwarding re-checks).
  async beforeDelete(host) {
    const thread = host.meta?.subagent?.thread;
    if (!thread) return;
    try {
      await unbindThread(host.bindings, thread.threadKey, host.key);
    } catch (err) {
      log.warn("thread_unbind_failed", { sessionKey: host.key, error: err });
    }
  },
};

export function bindThread(env: Env, b: ThreadBinding): Promise<void> {
  return callExtension(env.SESSIONS.getByName(b.threadKey), THREAD_EXTENSION, "bind", b);
}

export function unbindThread(env: Env, threadKey: string, childKey: string): Promise<void> {
  return callExtension(env.SESSIONS.getByName(threadKey), THREAD_EXTENSION, "unbind", childKey);
}

export function threadBindingOf(env: Env, threadKey: string): Promise<ThreadBinding | null> {
  return callExtension(env.SESSIONS.getByName(threadKey), THREAD_EXTENSION, "get");
}

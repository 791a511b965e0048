import type { SessionExtension } from "./extensions";
import type { SessionHost } from "./host";
import { listDeadTimers, retryDeadTimer } from "./timer-policy";

/** Dead timers over RPC, for GET /v1/sessions/{key}/timers/dead and its retry route (src/http/routes/session-records.ts). */
const deadTimerRpc = {
  list: (host: SessionHost, opts: { limit: number }) => listDeadTimers(host, opts.limit),
  retry: async (host: SessionHost, arg: { kind: string; ref: string }) => {
    const r = retryDeadTimer(host, arg.kind, arg.ref);
    if (r?.retried) await host.timers.arm();
    return r;
  },
};

declare module "./extensions" {
  interface ExtensionRpc {
    "dead-timers": typeof deadTimerRpc;
  }
}

/** Dead timers over RPC, for the /v1 dead-timer routes. */
export const deadTimersExtension: SessionExtension = { name: "dead-timers", rpc: deadTimerRpc };

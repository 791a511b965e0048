import { registerSessionExtension, type SessionObject } from "./session-object";
import { listDeadTimers, retryDeadTimer } from "./timer-policy";

/** Dead timers over RPC, for GET /v1/sessions/{key}/timers/dead and its retry route (src/http/routes-dead-timers.ts). */
const deadTimerRpc = {
  list: (host: SessionObject, opts: { limit: number }) => listDeadTimers(host, opts.limit),
  retry: async (host: SessionObject, arg: { kind: string; ref: string }) => {
    const r = retryDeadTimer(host, arg.kind, arg.ref);
    if (r?.retried) await host.timers.arm();
    return r;
  },
};

declare module "./session-object" {
  interface ExtensionRpc {
    "dead-timers": typeof deadTimerRpc;
  }
}

registerSessionExtension({ name: "dead-timers", rpc: deadTimerRpc });

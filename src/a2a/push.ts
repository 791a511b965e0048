import { StreamResponse } from "@a2a-js/sdk";
import { queueDelivery } from "../channels/outbox";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunSnapshot } from "../session/types";
import { redactUrlCredentials } from "../url-credentials";
import {
  deletePushConfig,
  type PushConfigRow,
  pushConfig,
  pushConfigsOf,
  pushDeliveryKey,
  putPushConfig,
} from "./push-store";
import { taskOfRun } from "./tasks";

/**
 * A2A push notifications (docs/protocols.md, "Push notifications"): the configs a client sets on a task, kept in
 * the session object that owns the task's run, and one outbox delivery per config for each state the task reaches
 * — `working` when the run starts, its final state when it ends — written in the transaction of that state change
 * (the run queue's start and end), so a state change and its notifications exist together or not at all. The
 * outbox attempts them (src/a2a/push-delivery.ts): signed, retried with backoff, dead after its attempt limit.
 */

export const A2A_PUSH_EXTENSION = "a2a-push";

/** The run statuses a notification is sent for; `queued` is what the client's own send answered. */
const NOTIFIED = new Set<RunSnapshot["status"]>(["running", "ok", "error", "timeout", "aborted", "lost"]);

/** A config as the handler answers it: credentials are never read back (`hasCredentials` says they are set). */
export interface PushConfigView {
  runId: string;
  id: string;
  url: string;
  token: string;
  authScheme: string | null;
  hasCredentials: boolean;
}

const viewOf = (r: PushConfigRow): PushConfigView => ({
  runId: r.run_id,
  id: r.id,
  url: r.url,
  token: r.token,
  authScheme: r.auth_scheme,
  hasCredentials: r.auth_credentials !== null,
});

/** Queue the notification of `run`'s current state for one config (inside the caller's transaction). */
function queuePush(host: SessionHost, run: RunSnapshot, config: PushConfigRow): void {
  if (!NOTIFIED.has(run.status)) return;
  const agentId = host.meta?.agentId ?? "";
  // The whole task, as GetTask answers it: a receiver needs nothing else to act on the notification.
  const body = JSON.stringify(StreamResponse.toJSON({ payload: { $case: "task", value: taskOfRun(agentId, run) } }));
  queueDelivery(host, {
    kind: "a2a_push",
    route: { channel: "a2a", to: redactUrlCredentials(config.url) },
    message: body,
    idempotencyKey: pushDeliveryKey(config.id, run.runId, run.status),
  });
}

function queueAll(host: SessionHost, run: RunSnapshot): void {
  for (const config of pushConfigsOf(host.sql, run.runId)) queuePush(host, run, config);
}

export interface SetPushConfig {
  runId: string;
  id: string;
  url: string;
  token: string;
  /** The client gave no token (`token` was made): setting the config again keeps the one it already has. */
  tokenMade: boolean;
  authScheme: string | null;
  authCredentials: string | null;
}

const pushRpc = {
  /**
   * Set (or replace) a config. A task already working or ended gets its current state at once: a config set
   * just after `SendMessage` — the SDK's own flow — would otherwise miss a run that started or ended meanwhile.
   */
  set: async (host: SessionHost, c: SetPushConfig): Promise<PushConfigView | "not_found" | "limit"> => {
    // One read of the run: nothing awaits between it and the transaction, so it is the row the queue sees.
    const run = host.hasStorage ? host.runRow(c.runId) : null;
    if (!run) return "not_found";
    const out = host.storage.transactionSync(() => {
      // A retried set (a SendMessage sent again) must not change the key a receiver already verifies with.
      const kept = c.tokenMade ? pushConfig(host.sql, c.runId, c.id)?.token : undefined;
      const row: PushConfigRow = {
        run_id: c.runId,
        id: c.id,
        url: c.url,
        token: kept ?? c.token,
        auth_scheme: c.authScheme,
        auth_credentials: c.authCredentials,
        created_at: Date.now(),
      };
      if (!putPushConfig(host.sql, row)) return "limit" as const;
      const stored = pushConfig(host.sql, c.runId, c.id)!;
      queuePush(host, host.snapshot(run), stored);
      return viewOf(stored);
    });
    // The attempt is the alarm's (due now), not this call's: the client's answer never waits on its receiver.
    await host.timers.arm();
    return out;
  },
  get: (host: SessionHost, a: { runId: string; id: string }): PushConfigView | null => {
    if (!host.hasStorage) return null;
    const r = pushConfig(host.sql, a.runId, a.id);
    return r ? viewOf(r) : null;
  },
  list: (host: SessionHost, a: { runId: string }): PushConfigView[] | null => {
    if (!host.hasStorage || !host.runRow(a.runId)) return null;
    return pushConfigsOf(host.sql, a.runId).map(viewOf);
  },
  delete: (host: SessionHost, a: { runId: string; id: string }): boolean =>
    host.hasStorage && deletePushConfig(host.sql, a.runId, a.id),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "a2a-push": typeof pushRpc;
  }
}

export const a2aPushExtension: SessionExtension = {
  name: A2A_PUSH_EXTENSION,
  onRunStarted: (host, _run, _input, started) => queueAll(host, started),
  // The outbox's own afterRunEnded (installed before this one) attempts what is due, these rows included.
  onRunEnded: (host, event) => queueAll(host, event.run),
  rpc: pushRpc,
};

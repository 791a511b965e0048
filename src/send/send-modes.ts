import { findAgent } from "../config/load";
import { assertOpen } from "../session/closing";
import type { SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import type { RunRow } from "../session/run-types";
import { sendRefusal } from "../session/send-into-rpc";
import type { Provenance } from "../session/types";
import {
  followupSteers,
  inboxByKey,
  inboxMessage,
  insertNotification,
  insertSteer,
  markConsumed,
  steersToFollowup,
} from "./send-inbox";

/**
 * The target side of sessions_send's `steer` and `notify` modes (src/tools/sessions-send-modes.ts): the
 * checks that need the target's own state and the row that accepts the message, in one synchronous call
 * — no await between the check that a run is running and the insert, so the run cannot end in between.
 * A steer the run never reached becomes a follow-up turn when the run ends (`onRunEnded`, then the
 * `steer-followup` timer): accepted guidance is never dropped (docs/contract.md, "sessions_send modes").
 */

/** Queue the follow-up turns of steers whose run ended before reading them (ref `inbox`). */
export const STEER_FOLLOWUP_TIMER = "steer-followup";
const FOLLOWUP_REF = "inbox";
/** Follow-up turns one timer firing queues; more are left to its next firing (due at once). */
const FOLLOWUPS_PER_FIRING = 20;

/**
 * The runs a steer may join: a conversation turn of the agent. Never an owner command (no model) nor an
 * announce step (its reply is posted to a channel, not read by the sender): those refuse steering.
 */
const STEERABLE_KINDS: ReadonlySet<string> = new Set([
  "inbound",
  "send",
  "a2a_turn",
  "subagent_task",
  "subagent_completion",
]);

/** The system prompt line of a steer's follow-up turn, so the model knows why a message arrives on its own. */
export const STEER_FOLLOWUP_NOTE =
  "This message was sent with sessions_send mode=steer to guide your previous run, which ended before it could read it. Take it into account now.";

export interface ModeSendRequest {
  message: string;
  provenance: Provenance;
  /** Scoped by the tool to the requester and principal; a retry with it returns the first receipt. */
  idempotencyKey?: string;
  /** Refuse unless this session was spawned by it (src/session/send-into-rpc.ts). */
  requireChildOf?: string;
}

export type SteerRefusal = "missing" | "lineage" | "policy" | "no_active_run" | "full";
export type SteerReceipt = { refused: SteerRefusal } | { steerId: string; runId: string };
export type NotifyReceipt = { refused: "missing" | "lineage" | "policy" } | { notificationId: string };

/** The running run a steer would reach at its next model step, if any (webhook runtimes run outside: none). */
export function steerableRun(host: SessionHost): RunRow | undefined {
  const runtime = findAgent(host.cfg, host.meta!.agentId)?.runtime?.type ?? "model";
  if (runtime !== "model") return undefined;
  const run = host.sql.exec<RunRow>("SELECT * FROM runs WHERE status = 'running' LIMIT 1").toArray()[0];
  return run && STEERABLE_KINDS.has(run.kind) ? run : undefined;
}

/** Why a steer or notify is refused before it is written, if it is: the same checks for both modes. */
function modeRefusal(host: SessionHost, arg: ModeSendRequest): "missing" | "lineage" | "policy" | null {
  assertOpen(host, host.key);
  // A missing session has no run to steer or inbox to notify; its storage is not created by asking.
  if (!host.hasStorage || !host.meta) return "missing";
  return sendRefusal(host, arg.requireChildOf);
}

const sendModesRpc = {
  steer: (host: SessionHost, arg: ModeSendRequest): SteerReceipt => {
    const refused = modeRefusal(host, arg);
    if (refused) return { refused };
    const key = arg.idempotencyKey ? `steer:${arg.idempotencyKey}` : undefined;
    return host.storage.transactionSync((): SteerReceipt => {
      const again = inboxByKey(host, key);
      if (again) return { steerId: again.id, runId: again.run_id ?? "" };
      const run = steerableRun(host);
      if (!run) return { refused: "no_active_run" };
      const id = insertSteer(host, run.id, inboxMessage(arg.message, arg.provenance, Date.now()), key);
      return id === "full" ? { refused: "full" } : { steerId: id, runId: run.id };
    });
  },
  notify: (host: SessionHost, arg: ModeSendRequest): NotifyReceipt => {
    const refused = modeRefusal(host, arg);
    if (refused) return { refused };
    const key = arg.idempotencyKey ? `notify:${arg.idempotencyKey}` : undefined;
    return host.storage.transactionSync((): NotifyReceipt => {
      const again = inboxByKey(host, key);
      if (again) return { notificationId: again.id };
      const { id } = insertNotification(host, inboxMessage(arg.message, arg.provenance, Date.now()), key);
      return { notificationId: id };
    });
  },
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "send-modes": typeof sendModesRpc;
  }
}

function textOf(content: string | { type: string; text?: string }[]): string {
  return typeof content === "string" ? content : content.map((b) => b.text ?? "").join("");
}

/**
 * The timer: each steer left over becomes one `send` run with the steer's text and provenance. The run's
 * idempotency key is the steer's id, so a firing cut short after the enqueue and repeated finds the same
 * run; the steer is marked used after it (docs/timers.md).
 */
async function queueFollowups(host: SessionHost): Promise<void> {
  const batch = host.meta ? followupSteers(host, FOLLOWUPS_PER_FIRING) : [];
  for (const s of batch) {
    await host.enqueue({
      input: {
        kind: "send",
        message: textOf(s.message.content),
        ...(s.message.provenance ? { provenance: s.message.provenance } : {}),
        extraSystemPrompt: STEER_FOLLOWUP_NOTE,
      },
      idempotencyKey: `steer-followup:${s.id}`,
      onlyIfExists: true,
    });
    host.storage.transactionSync(() => markConsumed(host, s.id));
  }
  host.storage.transactionSync(() => {
    if (host.meta && followupSteers(host, 1).length > 0)
      host.timers.set(STEER_FOLLOWUP_TIMER, FOLLOWUP_REF, Date.now());
    else host.timers.clear(STEER_FOLLOWUP_TIMER, FOLLOWUP_REF);
  });
}

export const sendModesExtension: SessionExtension = {
  name: "send-modes",
  rpc: sendModesRpc,
  // Inside the run-ending transaction: steers the run never reached are kept, with the timer that turns them into turns.
  onRunEnded(host, event) {
    if (steersToFollowup(host, event.run.runId) > 0)
      host.timers.set(STEER_FOLLOWUP_TIMER, FOLLOWUP_REF, Date.now(), undefined, { keepEarlier: true });
  },
  timers: { [STEER_FOLLOWUP_TIMER]: {} },
  onTimer: (host) => queueFollowups(host),
};

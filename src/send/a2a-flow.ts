import { fromRpcError, SwitchboardError } from "../errors";
import { log } from "../log";
import { callExtension, type SessionExtension } from "../session/extensions";
import type { SessionHost } from "../session/host";
import { LEASE_MS, type RunEndedEvent } from "../session/run-types";
import type { TimerRow } from "../session/timers";
import { FINAL_STATUSES, type Provenance, type RunInput, type RunSnapshot } from "../session/types";
import { announceStepPrompt, replyStepPrompt } from "./a2a-prompt";
import {
  type A2aStart,
  FLOW_TIMER,
  type FlowState,
  listFlows,
  loadFlow,
  NOTIFY_TIMER,
  type StepResult,
  saveFlow,
} from "./a2a-state";
import { startFlow, stepEnded, stepGaveUp } from "./a2a-steps";
import { ANNOUNCE_SKIP, REPLY_SKIP } from "./control-tokens";

/**
 * The agent-to-agent flow of `sessions_send` (docs/contract.md, "Flows"; test/send/a2a-flow.test.ts): after the primary run,
 * requester and target alternate reply-back turns, then the target runs the announce step whose
 * reply is delivered to the target's channel.
 *
 * Where OpenClaw runs this as a detached promise (lost on a restart), here it is a
 * persisted state machine in the TARGET's object: one `flows` row (step number, whose turn, the
 * replies so far) plus one `a2a` timer per flow that either dispatches the current step or guards
 * it. Step runs are ordinary queued runs with an idempotency key derived from (flow, step), so a
 * repeated dispatch never queues twice. A step that ran in the requester's object reports back
 * through an `a2a_notify` timer there (retried until the target acknowledges); the target's guard
 * re-checks the run by id, so a lost callback or an eviction never stalls or repeats a step. Every
 * transition is keyed by the step number, so a late or duplicate report is ignored.
 */

export { ANNOUNCE_STEP_MESSAGE, announceStepPrompt, messageContextPrompt, replyStepPrompt } from "./a2a-prompt";
export { announceRoute, announceRouteOf } from "./a2a-route";
export {
  type A2aStart,
  FLOW_QUOTE_BYTES,
  FLOW_TIMER,
  type FlowOutcome,
  type FlowState,
  NOTIFY_TIMER,
  TURN_EXCERPT_BYTES,
} from "./a2a-state";
// The flow's parts, re-exported here because importing this module is what registers the extension:
// its prompts (a2a-prompt.ts), announce route (a2a-route.ts), row (a2a-state.ts) and transitions (a2a-steps.ts).
export { ANNOUNCE_SKIP, REPLY_SKIP };

/** How long a step waits for its run before the flow moves on without it (60 s per step, as in OpenClaw). */
export const STEP_WAIT_MS = 60_000;
/** An RPC in progress pushes its timer this far ahead, so a second pass does not repeat it meanwhile. */
const CALL_LEASE_MS = 15_000;
const EXT = "a2a-flow" as const;

// ---------------------------------------------------------------- dispatch and guard (timer driven)

/** Push a timer ahead before doing I/O for it; null when it is not due (another pass has it). */
function claimTimer(host: SessionHost, kind: string, ref: string, leaseMs: number): TimerRow | null {
  return host.storage.transactionSync(() => {
    const t = host.timers.get(kind, ref);
    const now = Date.now();
    if (!t || t.due_at > now) return null;
    host.sql.exec("UPDATE timers SET due_at = ? WHERE kind = ? AND ref = ?", now + leaseMs, kind, ref);
    return t;
  });
}

function stepInput(host: SessionHost, f: FlowState): RunInput {
  // Provenance names the other side: the requester's turns come from the target and vice versa.
  const provenance: Provenance =
    f.step === "turn" && f.stepSession === f.requesterKey && f.requesterKey !== f.targetKey
      ? {
          kind: "inter_session",
          sourceSessionKey: f.targetKey,
          sourceChannel: f.targetChannel,
          sourceTool: "sessions_send",
        }
      : {
          kind: "inter_session",
          sourceSessionKey: f.requesterKey,
          sourceChannel: f.requesterChannel,
          sourceTool: "sessions_send",
        };
  return {
    kind: f.step === "announce" ? "a2a_announce" : "a2a_turn",
    message: f.stepMessage ?? "",
    provenance,
    extraSystemPrompt: f.step === "announce" ? announceStepPrompt(f) : replyStepPrompt(f, f.turn!),
    flowId: f.id,
    data: { flowOwner: host.key, stepNo: f.stepNo },
  };
}

function stubFor(host: SessionHost, key: string) {
  return host.bindings.SESSIONS.getByName(key);
}

/** The `a2a` timer of a flow: dispatch the current step's run, or (once dispatched) guard it. */
async function onFlowTimer(host: SessionHost, flowId: string): Promise<void> {
  const f0 = loadFlow(host, flowId);
  if (!f0 || f0.step === "done") {
    host.timers.clear(FLOW_TIMER, flowId);
    return;
  }
  if (!claimTimer(host, FLOW_TIMER, flowId, STEP_WAIT_MS)) return;
  const f = loadFlow(host, flowId)!;
  const stepNo = f.stepNo;
  const local = f.stepSession === host.key;

  if (!f.stepRunId) {
    // Dispatch. The idempotency key makes a repeated dispatch (crash after enqueue, before we noted
    // the run id) return the run it already queued instead of a second one.
    const req = { input: stepInput(host, f), idempotencyKey: `a2a:${f.id}:step:${stepNo}` };
    let snap: RunSnapshot;
    try {
      // A requester deleted since it sent is not brought back as an empty session for a ping-pong turn
      // (one that never had a session — a tool caller without one — gets it created, as any turn would).
      const onlyIfExists = f.requesterExisted === true && f.stepSession === f.requesterKey;
      snap = local
        ? await host.enqueue(req)
        : await stubFor(host, f.stepSession!).enqueue({ ...req, ...(onlyIfExists ? { onlyIfExists } : {}) });
    } catch (err) {
      const e = fromRpcError(err);
      if (!(e instanceof SwitchboardError && e.type === "not_found")) throw e;
      // Its turn fails: the ping-pong ends and the announce still runs (as for any failed turn).
      host.storage.transactionSync(() => stepEnded(host, flowId, stepNo, { status: "error" }));
      await host.timers.arm();
      await runDueNow(host);
      return;
    }
    host.storage.transactionSync(() => {
      const cur = loadFlow(host, flowId);
      if (!cur || cur.stepNo !== stepNo || cur.stepRunId) return;
      cur.stepRunId = snap.runId;
      saveFlow(host, cur);
      // The guard: if no report arrives within the step's wait, look at the run ourselves.
      host.timers.set(FLOW_TIMER, flowId, Date.now() + STEP_WAIT_MS);
    });
    await host.timers.arm();
    return;
  }

  // Guard: the report did not come in time. Re-check the run by id.
  const snap = local ? await host.getRun(f.stepRunId) : await stubFor(host, f.stepSession!).getRun(f.stepRunId);
  host.storage.transactionSync(() => {
    const cur = loadFlow(host, flowId);
    if (!cur || cur.stepNo !== stepNo || cur.step === "done") return;
    if (snap && FINAL_STATUSES.has(snap.status)) {
      stepEnded(host, flowId, stepNo, { status: snap.status, reply: snap.reply, runId: snap.runId });
    } else if (snap && cur.guardChecks < 1) {
      // Still queued or running: give it one lease period more, which is how long a run whose
      // executor was lost to an eviction takes to be re-queued by its session (docs/architecture.md).
      cur.guardChecks += 1;
      saveFlow(host, cur);
      host.timers.set(FLOW_TIMER, flowId, Date.now() + LEASE_MS);
    } else {
      // The step's wait is over (or its run vanished): move on without it, as OpenClaw does.
      stepEnded(host, flowId, stepNo, { status: "timeout", runId: cur.stepRunId });
    }
  });
  await host.timers.arm();
  await runDueNow(host);
}

/** The `a2a_notify` timer in the session that ran a step: report the run's end to the flow's owner until it acknowledges. */
async function onNotifyTimer(host: SessionHost, t: TimerRow): Promise<void> {
  if (!claimTimer(host, NOTIFY_TIMER, t.ref, CALL_LEASE_MS)) return;
  const p = JSON.parse(t.payload ?? "{}") as { owner: string; flowId: string; stepNo: number; result?: StepResult };
  // The payload names the run (the timer's ref); its reply is read from the run row now, never copied into the timer.
  const run = host.runRow(t.ref);
  const result: StepResult =
    p.result ??
    (run
      ? { status: run.status, ...(run.reply !== null ? { reply: run.reply } : {}), runId: run.id }
      : { status: "error", runId: t.ref });
  await callExtension(stubFor(host, p.owner), EXT, "stepEnded", { flowId: p.flowId, stepNo: p.stepNo, result });
  host.timers.clear(NOTIFY_TIMER, t.ref);
  await host.timers.arm();
}

/** Work on due flow timers right away (after a run ended, after a callback) instead of at the next alarm. */
async function runDueNow(host: SessionHost): Promise<void> {
  const due = host.timers.dueOfKinds([FLOW_TIMER, NOTIFY_TIMER], Date.now());
  for (const t of due) {
    try {
      if (t.kind === FLOW_TIMER) await onFlowTimer(host, t.ref);
      else await onNotifyTimer(host, t);
    } catch (err) {
      // The timer row is still there: the alarm retries it.
      log.error("a2a_flow_step_failed", { sessionKey: host.key, kind: t.kind, ref: t.ref, error: err });
    }
  }
}

function onRunEnded(host: SessionHost, { run, input }: RunEndedEvent): void {
  if (input.kind === "send" && input.flowId && input.data?.a2a) {
    startFlow(host, run, input, input.data.a2a as A2aStart);
    return;
  }
  if ((input.kind !== "a2a_turn" && input.kind !== "a2a_announce") || !input.flowId) return;
  const owner = input.data?.flowOwner as string | undefined;
  const stepNo = input.data?.stepNo as number | undefined;
  if (!owner || typeof stepNo !== "number") return;
  const result: StepResult = { status: run.status, reply: run.reply, runId: run.runId };
  if (owner === host.key) {
    stepEnded(host, input.flowId, stepNo, result);
    return;
  }
  // The report to the flow's owner is a durable timer written with the run's end: it is retried until acknowledged.
  host.timers.set(NOTIFY_TIMER, run.runId, Date.now(), { owner, flowId: input.flowId, stepNo });
}

const a2aRpc = {
  /** A step that ran in another session ended (its `a2a_notify` timer calls this). */
  stepEnded: async (host: SessionHost, arg: { flowId: string; stepNo: number; result: StepResult }) => {
    // A target deleted meanwhile has no flow to advance: acknowledge, or the caller would retry forever.
    if (!host.hasStorage) return { ok: true };
    const advanced = host.storage.transactionSync(() => stepEnded(host, arg.flowId, arg.stepNo, arg.result));
    if (advanced) {
      await host.timers.arm();
      // Dispatch the next step without holding the caller: it may be the caller's own session.
      void runDueNow(host).catch((err) => log.error("a2a_flow_dispatch_failed", { sessionKey: host.key, error: err }));
    }
    return { ok: true };
  },
  /** Oldest first, up to 500 flows and FLOW_LIST_BYTES (src/send/a2a-state.ts). */
  list: (host: SessionHost) => listFlows(host),
};

/** sessions_send's agent-to-agent flow: the reply-back turns and the announce step after the primary run. */
export const a2aFlowExtension: SessionExtension = {
  name: EXT,
  finishedFlows: { a2a: ["done"] },
  onRunEnded,
  afterRunEnded: (host) => runDueNow(host),
  timers: {
    [FLOW_TIMER]: { policy: { maxAttempts: 6 }, onDead: stepGaveUp },
    // A report that never gets through needs no handler: the owner's guard re-checks the step's run by id.
    [NOTIFY_TIMER]: { policy: { maxAttempts: 8 } },
  },
  async onTimer(host, t) {
    if (t.kind === FLOW_TIMER) await onFlowTimer(host, t.ref);
    else await onNotifyTimer(host, t);
  },
  rpc: a2aRpc,
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "a2a-flow": typeof a2aRpc;
  }
}

import { queueDelivery } from "../channels/outbox";
import { capText } from "../session/byte-budget";
import type { SessionHost } from "../session/host";
import type { DeadTimer } from "../session/timer-policy";
import type { RunInput, RunSnapshot } from "../session/types";
import { ANNOUNCE_STEP_MESSAGE } from "./a2a-prompt";
import { announceRoute } from "./a2a-route";
import {
  type A2aStart,
  FLOW_QUOTE_BYTES,
  FLOW_TIMER,
  type FlowOutcome,
  type FlowState,
  loadFlow,
  type StepResult,
  saveFlow,
  TURN_EXCERPT_BYTES,
} from "./a2a-state";
import { ANNOUNCE_SKIP, isSilentReply, REPLY_SKIP } from "./control-tokens";

/**
 * The transitions of an agent-to-agent flow (src/send/a2a-flow.ts): each runs synchronously inside
 * the caller's transaction and is keyed by the step number, so a late or duplicate report is ignored.
 */

/**
 * Move the flow to its next step and schedule its dispatch (due now), all in the caller's transaction.
 * `message`: the whole text a turn's run receives (the other side's last reply).
 */
function enterStep(host: SessionHost, f: FlowState, step: "turn" | "announce", turn?: number, message?: string): void {
  f.stepNo += 1;
  f.step = step;
  f.turn = turn;
  f.stepRunId = undefined;
  f.guardChecks = 0;
  if (step === "announce") {
    f.stepSession = f.targetKey;
    f.stepMessage = ANNOUNCE_STEP_MESSAGE;
  } else {
    // The requester speaks first (turn 1), then the sides alternate; each hears the other's last reply.
    f.stepSession = turn! % 2 === 1 ? f.requesterKey! : f.targetKey;
    f.stepMessage = message ?? "";
  }
  saveFlow(host, f);
  host.timers.set(FLOW_TIMER, f.id, Date.now());
}

function finish(host: SessionHost, f: FlowState, outcome: FlowOutcome): void {
  f.step = "done";
  f.outcome = outcome;
  f.stepSession = undefined;
  f.stepMessage = undefined;
  saveFlow(host, f);
}

/** The primary run ended in the target: create the flow (synchronously, inside the run-ending transaction). */
export function startFlow(host: SessionHost, run: RunSnapshot, input: RunInput, start: A2aStart): void {
  const flowId = input.flowId!;
  if (loadFlow(host, flowId)) return; // idempotent: the run ends once, but be safe
  const route = announceRoute(host);
  const f: FlowState = {
    id: flowId,
    requesterKey: start.requesterKey,
    ...(start.requesterExisted ? { requesterExisted: true } : {}),
    requesterChannel: start.requesterChannel,
    targetKey: host.key,
    targetDisplayKey: start.targetDisplayKey,
    targetChannel: route?.channel ?? "unknown",
    originalMessage: capText(input.message, FLOW_QUOTE_BYTES),
    primaryRunId: run.runId,
    maxTurns: Math.max(0, Math.min(5, Math.floor(start.maxTurns))),
    stepNo: 0,
    step: "turn",
    guardChecks: 0,
    turns: [],
  };
  const roundOne = run.status === "ok" ? (run.reply ?? "").trim() : "";
  // No round-1 reply (error, timeout, empty, or NO_REPLY: the target chose silence): nothing to ping-pong
  // about or announce (OpenClaw's step 0; test/send/a2a-flow.test.ts, test/send/a2a-no-reply.test.ts).
  if (!roundOne || isSilentReply(roundOne)) {
    finish(host, f, "no_round_one_reply");
    return;
  }
  f.roundOneReply = capText(roundOne, FLOW_QUOTE_BYTES);
  const canPingPong = f.maxTurns > 0 && !!f.requesterKey && f.requesterKey !== f.targetKey && roundOne !== REPLY_SKIP;
  if (canPingPong) enterStep(host, f, "turn", 1, roundOne);
  else enterStep(host, f, "announce");
}

/**
 * A step's run ended (reported by its session, or found by the guard). Ignored unless it is the
 * flow's current step, so duplicate callbacks, a guard racing a callback and late runs are harmless.
 */
export function stepEnded(host: SessionHost, flowId: string, stepNo: number, result: StepResult): boolean {
  const f = loadFlow(host, flowId);
  if (!f || f.step === "done" || f.stepNo !== stepNo) return false;
  const text = result.status === "ok" ? (result.reply ?? "").trim() : "";
  if (f.step === "turn") {
    f.turns.push({
      turn: f.turn!,
      sessionKey: f.stepSession!,
      runId: result.runId ?? f.stepRunId,
      reply: text ? capText(text, TURN_EXCERPT_BYTES) : undefined,
      status: result.status,
    });
    // An empty or failed turn, exactly REPLY_SKIP, or NO_REPLY (silence: never forwarded as the next
    // message) ends the ping-pong; the announce still runs.
    if (!text || text === REPLY_SKIP || isSilentReply(text)) {
      enterStep(host, f, "announce");
      return true;
    }
    f.latestReply = capText(text, FLOW_QUOTE_BYTES);
    if (f.turn! >= f.maxTurns) enterStep(host, f, "announce");
    else enterStep(host, f, "turn", f.turn! + 1, text);
    return true;
  }
  // Announce step: exactly ANNOUNCE_SKIP, NO_REPLY (or nothing) is silence; anything else goes to the target's channel.
  if (!text) {
    finish(host, f, "announce_no_reply");
    return true;
  }
  if (text === ANNOUNCE_SKIP || isSilentReply(text)) {
    finish(host, f, "announce_skipped");
    return true;
  }
  const route = announceRoute(host) ?? { channel: "unknown", to: null };
  // The idempotency key is the flow's: however often this step is reported, one delivery exists.
  const d = queueDelivery(host, { kind: "announce", route, message: text, idempotencyKey: `a2a:${f.id}:announce` });
  f.deliveryId = d.id;
  f.deliveryStatus = d.status;
  finish(host, f, "announced");
  return true;
}

/**
 * A step whose dispatch or guard kept failing (its session unreachable, storage errors) ends the flow
 * with the error, in the transaction that records the timer as dead: never a flow stuck mid-step.
 */
export function stepGaveUp(host: SessionHost, dead: DeadTimer): void {
  const f = loadFlow(host, dead.ref);
  if (!f || f.step === "done") return;
  const step = f.step === "announce" ? "announce step" : `reply-back turn ${f.turn}`;
  f.error = `The ${step} gave up after ${dead.attempts} attempts: ${dead.lastError}`;
  finish(host, f, "failed");
}

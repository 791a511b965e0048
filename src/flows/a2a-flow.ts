import { queueDelivery, routeOf } from "../channels/outbox";
import { displayKey, parseCanonical, type ParsedKey } from "../keys";
import { fromRpcError, SwitchboardError } from "../errors";
import { capText } from "../session/byte-budget";
import { callExtension, LEASE_MS, registerSessionExtension, type RunEndedEvent, type SessionObject } from "../session/session-object";
import { defineTimerKind, type DeadTimer } from "../session/timer-policy";
import type { TimerRow } from "../session/timers";
import { A2A_ANNOUNCE_STEP_HEADER, A2A_REPLY_STEP_HEADER, ANNOUNCE_SKIP, REPLY_SKIP } from "./control-tokens";
import { FINAL_STATUSES, type DeliveryRoute, type Provenance, type RunInput, type RunSnapshot, type SessionMeta } from "../session/types";
import { log } from "../log";

/**
 * The agent-to-agent flow of `sessions_send` (docs/contract.md, "Flows"; test/a2a-flow.test.ts): after the primary run,
 * requester and target alternate reply-back turns, then the target runs the announce step whose
 * reply is delivered to the target's channel.
 *
 * Where OpenClaw runs this as a detached promise (lost on restart, issue #45926), here it is a
 * persisted state machine in the TARGET's object: one `flows` row (step number, whose turn, the
 * replies so far) plus one `a2a` timer per flow that either dispatches the current step or guards
 * it. Step runs are ordinary queued runs with an idempotency key derived from (flow, step), so a
 * repeated dispatch never queues twice. A step that ran in the requester's object reports back
 * through an `a2a_notify` timer there (retried until the target acknowledges); the target's guard
 * re-checks the run by id, so a lost callback or an eviction never stalls or repeats a step. Every
 * transition is keyed by the step number, so a late or duplicate report is ignored.
 */

export { ANNOUNCE_SKIP, REPLY_SKIP };
export const ANNOUNCE_STEP_MESSAGE = "Agent-to-agent announce step.";
/** How long a step waits for its run before the flow moves on without it (60 s per step, as in OpenClaw). */
export const STEP_WAIT_MS = 60_000;
export const FLOW_TIMER = "a2a";
export const NOTIFY_TIMER = "a2a_notify";
/** An RPC in progress pushes its timer this far ahead, so a second pass does not repeat it meanwhile. */
const CALL_LEASE_MS = 15_000;
const EXT = "a2a-flow" as const;

/** What `sessions_send` stores on the primary run for the flow (the flow row is written when that run ends). */
export interface A2aStart {
  requesterKey?: string;
  /** The requester's session existed when it sent: if it is gone by its turn, it was deleted and is not re-created. */
  requesterExisted?: boolean;
  requesterChannel?: string;
  targetDisplayKey: string;
  maxTurns: number;
}

export type FlowOutcome = "announced" | "announce_skipped" | "announce_no_reply" | "no_round_one_reply" | "failed";

export interface FlowState {
  id: string;
  requesterKey?: string;
  requesterExisted?: boolean;
  requesterChannel?: string;
  targetKey: string;
  targetDisplayKey: string;
  targetChannel: string;
  /** Quoted in the announce prompt: cut at FLOW_QUOTE_BYTES, like the two replies below (the row stays bounded). */
  originalMessage: string;
  primaryRunId: string;
  roundOneReply?: string;
  latestReply?: string;
  maxTurns: number;
  /** Increases with every step; a report for another step number is stale. */
  stepNo: number;
  step: "turn" | "announce" | "done";
  turn?: number;
  stepSession?: string;
  /** The one whole text the flow holds: what the current step's run receives (a run reply, so within the message cap). */
  stepMessage?: string;
  stepRunId?: string;
  /** Guard re-checks made for the current step (the first extension gives a lost executor its lease). */
  guardChecks: number;
  /** Each turn's reply is kept as an excerpt (TURN_EXCERPT_BYTES); the whole text is in the run (`runId`). */
  turns: { turn: number; sessionKey: string; runId?: string; reply?: string; status: string }[];
  outcome?: FlowOutcome;
  /** Outcome "failed": which step gave up and why (its timer is listed under GET /v1/sessions/{key}/timers/dead). */
  error?: string;
  deliveryId?: string;
  deliveryStatus?: string;
}

interface StepResult {
  status: RunSnapshot["status"];
  reply?: string;
  runId?: string;
}

// ---------------------------------------------------------------- prompts (OpenClaw's exact lines)

export function messageContextPrompt(p: { requesterKey?: string; requesterChannel?: string; targetDisplayKey: string }): string {
  return [
    "Agent-to-agent message context:",
    p.requesterKey ? `Agent 1 (requester) session: ${displayKey(p.requesterKey)}.` : null,
    p.requesterChannel ? `Agent 1 (requester) channel: ${p.requesterChannel}.` : null,
    `Agent 2 (target) session: ${p.targetDisplayKey}.`,
  ]
    .filter((l): l is string => l !== null)
    .join("\n");
}

function flowLines(f: FlowState): string[] {
  return [
    f.requesterKey ? `Agent 1 (requester) session: ${displayKey(f.requesterKey)}.` : null,
    f.requesterChannel ? `Agent 1 (requester) channel: ${f.requesterChannel}.` : null,
    `Agent 2 (target) session: ${f.targetDisplayKey}.`,
    `Agent 2 (target) channel: ${f.targetChannel}.`,
  ].filter((l): l is string => l !== null);
}

export function replyStepPrompt(f: FlowState, turn: number): string {
  const requesterSpeaks = turn % 2 === 1;
  return [
    A2A_REPLY_STEP_HEADER,
    `Current agent: ${requesterSpeaks ? "Agent 1 (requester)" : "Agent 2 (target)"}.`,
    `Turn ${turn} of ${f.maxTurns}.`,
    ...flowLines(f),
    `If you want to stop the ping-pong, reply exactly "${REPLY_SKIP}".`,
  ].join("\n");
}

export function announceStepPrompt(f: FlowState): string {
  return [
    A2A_ANNOUNCE_STEP_HEADER,
    ...flowLines(f),
    `Original request: ${f.originalMessage}`,
    f.roundOneReply ? `Round 1 reply: ${f.roundOneReply}` : "Round 1 reply: (not available).",
    f.latestReply ? `Latest reply: ${f.latestReply}` : "Latest reply: (not available).",
    `If you want to remain silent, reply exactly "${ANNOUNCE_SKIP}".`,
    "Any other reply will be posted to the target channel.",
    "After this reply, the agent-to-agent conversation is over.",
  ].join("\n");
}

// ---------------------------------------------------------------- announce target (without OpenClaw's list scan)

/**
 * Where the target's announce goes: the route recorded from the session's own inbound traffic,
 * else the one its key names (`<channel>:group|channel:<id>` → `to: "group:<id>"`). Never guessed
 * by scanning other sessions.
 */
export function announceRoute(host: SessionObject): DeliveryRoute | null {
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
  return { channel: parsed.channel, to: `${parsed.chatType}:${id.join(":")}`, accountId: null, threadId: parsed.threadId ?? null };
}

// ---------------------------------------------------------------- persisted state


function loadFlow(host: SessionObject, id: string): FlowState | null {
  const row = host.sql.exec<{ json: string }>("SELECT json FROM flows WHERE id = ? AND kind = 'a2a'", id).toArray()[0];
  return row ? (JSON.parse(row.json) as FlowState) : null;
}

function saveFlow(host: SessionObject, f: FlowState): void {
  const now = Date.now();
  host.sql.exec(
    `INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, 'a2a', ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET state = excluded.state, json = excluded.json, updated_at = excluded.updated_at`,
    f.id, f.step, JSON.stringify(f), now, now,
  );
  if (f.step === "done") host.timers.clear(FLOW_TIMER, f.id);
}

/**
 * A flow row holds references and cut copies, never unbounded text (docs/limits.md): five 512 KiB turns
 * copied whole would pass SQLite's 2 MB row limit. Quotes for the announce prompt and turn excerpts are cut here.
 */
export const FLOW_QUOTE_BYTES = 16 * 1024;
export const TURN_EXCERPT_BYTES = 4 * 1024;
const FLOW_LIST_BYTES = 2 * 1024 * 1024;

/**
 * Move the flow to its next step and schedule its dispatch (due now), all in the caller's transaction.
 * `message`: the whole text a turn's run receives (the other side's last reply).
 */
function enterStep(host: SessionObject, f: FlowState, step: "turn" | "announce", turn?: number, message?: string): void {
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

function finish(host: SessionObject, f: FlowState, outcome: FlowOutcome): void {
  f.step = "done";
  f.outcome = outcome;
  f.stepSession = undefined;
  f.stepMessage = undefined;
  saveFlow(host, f);
}

/** The primary run ended in the target: create the flow (synchronously, inside the run-ending transaction). */
function startFlow(host: SessionObject, run: RunSnapshot, input: RunInput, start: A2aStart): void {
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
  // No round-1 reply (error, timeout, empty): nothing to ping-pong about or announce (OpenClaw's step 0; test/a2a-flow.test.ts).
  if (!roundOne) return finish(host, f, "no_round_one_reply");
  f.roundOneReply = capText(roundOne, FLOW_QUOTE_BYTES);
  const canPingPong = f.maxTurns > 0 && !!f.requesterKey && f.requesterKey !== f.targetKey && roundOne !== REPLY_SKIP;
  if (canPingPong) enterStep(host, f, "turn", 1, roundOne);
  else enterStep(host, f, "announce");
}

/**
 * A step's run ended (reported by its session, or found by the guard). Ignored unless it is the
 * flow's current step, so duplicate callbacks, a guard racing a callback and late runs are harmless.
 */
function stepEnded(host: SessionObject, flowId: string, stepNo: number, result: StepResult): boolean {
  const f = loadFlow(host, flowId);
  if (!f || f.step === "done" || f.stepNo !== stepNo) return false;
  const text = result.status === "ok" ? (result.reply ?? "").trim() : "";
  if (f.step === "turn") {
    f.turns.push({ turn: f.turn!, sessionKey: f.stepSession!, runId: result.runId ?? f.stepRunId, reply: text ? capText(text, TURN_EXCERPT_BYTES) : undefined, status: result.status });
    // An empty or failed turn, or exactly REPLY_SKIP, ends the ping-pong; the announce still runs.
    if (!text || text === REPLY_SKIP) {
      enterStep(host, f, "announce");
      return true;
    }
    f.latestReply = capText(text, FLOW_QUOTE_BYTES);
    if (f.turn! >= f.maxTurns) enterStep(host, f, "announce");
    else enterStep(host, f, "turn", f.turn! + 1, text);
    return true;
  }
  // Announce step: exactly ANNOUNCE_SKIP (or nothing) is silence; anything else goes to the target's channel.
  if (!text) {
    finish(host, f, "announce_no_reply");
    return true;
  }
  if (text === ANNOUNCE_SKIP) {
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

// ---------------------------------------------------------------- dispatch and guard (timer driven)

/** Push a timer ahead before doing I/O for it; null when it is not due (another pass has it). */
function claimTimer(host: SessionObject, kind: string, ref: string, leaseMs: number): TimerRow | null {
  return host.storage.transactionSync(() => {
    const t = host.timers.get(kind, ref);
    const now = Date.now();
    if (!t || t.due_at > now) return null;
    host.sql.exec("UPDATE timers SET due_at = ? WHERE kind = ? AND ref = ?", now + leaseMs, kind, ref);
    return t;
  });
}

function stepInput(host: SessionObject, f: FlowState): RunInput {
  // Provenance names the other side: the requester's turns come from the target and vice versa.
  const provenance: Provenance =
    f.step === "turn" && f.stepSession === f.requesterKey && f.requesterKey !== f.targetKey
      ? { kind: "inter_session", sourceSessionKey: f.targetKey, sourceChannel: f.targetChannel, sourceTool: "sessions_send" }
      : { kind: "inter_session", sourceSessionKey: f.requesterKey, sourceChannel: f.requesterChannel, sourceTool: "sessions_send" };
  return {
    kind: f.step === "announce" ? "a2a_announce" : "a2a_turn",
    message: f.stepMessage ?? "",
    provenance,
    extraSystemPrompt: f.step === "announce" ? announceStepPrompt(f) : replyStepPrompt(f, f.turn!),
    flowId: f.id,
    data: { flowOwner: host.key, stepNo: f.stepNo },
  };
}

function stubFor(host: SessionObject, key: string) {
  return host.bindings.SESSIONS.getByName(key);
}

/** The `a2a` timer of a flow: dispatch the current step's run, or (once dispatched) guard it. */
async function onFlowTimer(host: SessionObject, flowId: string): Promise<void> {
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
      snap = local ? await host.enqueue(req) : await stubFor(host, f.stepSession!).enqueue({ ...req, ...(onlyIfExists ? { onlyIfExists } : {}) });
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
async function onNotifyTimer(host: SessionObject, t: TimerRow): Promise<void> {
  if (!claimTimer(host, NOTIFY_TIMER, t.ref, CALL_LEASE_MS)) return;
  const p = JSON.parse(t.payload ?? "{}") as { owner: string; flowId: string; stepNo: number; result?: StepResult };
  // The payload names the run (the timer's ref); its reply is read from the run row now, never copied into the timer.
  const run = host.runRow(t.ref);
  const result: StepResult = p.result ?? (run ? { status: run.status, ...(run.reply !== null ? { reply: run.reply } : {}), runId: run.id } : { status: "error", runId: t.ref });
  await callExtension(stubFor(host, p.owner), EXT, "stepEnded", { flowId: p.flowId, stepNo: p.stepNo, result });
  host.timers.clear(NOTIFY_TIMER, t.ref);
  await host.timers.arm();
}

/** Work on due flow timers right away (after a run ended, after a callback) instead of at the next alarm. */
async function runDueNow(host: SessionObject): Promise<void> {
  const due = host.sql
    .exec<TimerRow>("SELECT * FROM timers WHERE kind IN (?, ?) AND due_at <= ? ORDER BY due_at LIMIT 20", FLOW_TIMER, NOTIFY_TIMER, Date.now())
    .toArray();
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

function onRunEnded(host: SessionObject, { run, input }: RunEndedEvent): void {
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
  stepEnded: async (host: SessionObject, arg: { flowId: string; stepNo: number; result: StepResult }) => {
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
  /** Oldest first, up to 500 flows and FLOW_LIST_BYTES (rows are read one by one and the read stops there). */
  list: (host: SessionObject) => {
    const out: FlowState[] = [];
    if (!host.hasStorage) return out;
    let bytes = 0;
    for (const r of host.sql.exec<{ json: string }>("SELECT json FROM flows WHERE kind = 'a2a' ORDER BY created_at LIMIT 500")) {
      bytes += r.json.length;
      if (out.length > 0 && bytes > FLOW_LIST_BYTES) break;
      out.push(JSON.parse(r.json) as FlowState);
    }
    return out;
  },
};

/**
 * A step whose dispatch or guard kept failing (its session unreachable, storage errors) ends the flow
 * with the error, in the transaction that records the timer as dead: never a flow stuck mid-step.
 */
function stepGaveUp(host: SessionObject, dead: DeadTimer): void {
  const f = loadFlow(host, dead.ref);
  if (!f || f.step === "done") return;
  const step = f.step === "announce" ? "announce step" : `reply-back turn ${f.turn}`;
  f.error = `The ${step} gave up after ${dead.attempts} attempts: ${dead.lastError}`;
  finish(host, f, "failed");
}

defineTimerKind<SessionObject>(FLOW_TIMER, { policy: { maxAttempts: 6 }, onDead: stepGaveUp });
// A report that never gets through needs no handler: the owner's guard re-checks the step's run by id.
defineTimerKind(NOTIFY_TIMER, { policy: { maxAttempts: 8 } });

registerSessionExtension({
  name: EXT,
  finishedFlows: { a2a: ["done"] },
  onRunEnded,
  afterRunEnded: (host) => runDueNow(host),
  async onTimer(host, t) {
    if (t.kind === FLOW_TIMER) {
      await onFlowTimer(host, t.ref);
      return true;
    }
    if (t.kind === NOTIFY_TIMER) {
      await onNotifyTimer(host, t);
      return true;
    }
    return false;
  },
  rpc: a2aRpc,
});

declare module "../session/session-object" {
  interface ExtensionRpc {
    "a2a-flow": typeof a2aRpc;
  }
}

import { log } from "../log";
import type { FlowFinding } from "../session/audit-types";
import { assertOpen } from "../session/closing";
import { callExtension, type SessionExtension } from "../session/extensions";
import { getFlowRow, hasFlowRow, putFlowRow } from "../session/flow-rows";
import type { SessionHost } from "../session/host";
import { timerGuard } from "../session/run-audit";
import type { TimerRow } from "../session/timers";
import type { DeadDelivery, SessionMeta } from "../session/types";
import { CHILD_FLOW, childFlowId, countActiveChildren, releaseSlotSync, SLOT_TIMER } from "./child-slots";
import { ANNOUNCE_IN_FLOW, type AnnounceHandoff, internalMessage, recordDirectAnnounce } from "./direct-announce";
import { acceptForTurn } from "./requester-turn";
import { absorbIntoBatch } from "./yield-batch";

/**
 * The requester's half of the sub-agent lifecycle, in the requester's own object:
 *  - active-children slots (child-slots.ts): reserved atomically before a child is created, ended
 *    once the child's completion is absorbed;
 *  - the announce inbox: a child's completion announce, exactly once per child run (key
 *    `announce:v1:<child>:<run>`), either recorded and delivered as it is ("direct",
 *    direct-announce.ts) or turned into a turn of this session whose reply is delivered
 *    ("requester", requester-turn.ts);
 *  - the dead-letter notice: when an announce delivery finally fails, this session is told.
 * Reached from other objects and the tool through `callExtension` (typed by `requesterRpc`; wrappers below).
 */

// Where callers have always found it.
export { announceIdempotencyKey } from "./direct-announce";

export const REQUESTER_EXTENSION = "subagent-requester" as const;
const DEAD_NOTICE_FLOW = "subagent_announce_dead";
const SLOT_FIRST_CHECK_MS = 60_000;
const SLOT_RECHECK_MS = 10 * 60_000;

export interface RequesterSpawnState {
  meta: SessionMeta | null;
  activeChildren: number;
}

export interface AnnounceHandoffResult {
  duplicate: boolean;
  recorded: boolean;
  requesterGone?: boolean;
  /** "requester" delivery: the completion waits for this session's turn. */
  turnQueued?: boolean;
  /** The child belongs to a yielded batch: its result waits for the batch's resume turn (src/spawn/yield-batch.ts). */
  batched?: boolean;
  delivery?: { id: string; status: string };
}

/** Child key of an announce idempotency key (run ids hold no ':', child keys do). */
function childKeyOfAnnounce(idempotencyKey: string): string {
  const rest = idempotencyKey.slice("announce:v1:".length);
  return rest.slice(0, rest.lastIndexOf(":"));
}

/** Read-only: never creates the requester session (a refused spawn changes nothing). */
function spawnState(host: SessionHost): RequesterSpawnState {
  return { meta: host.meta, activeChildren: countActiveChildren(host) };
}

/** Reserve one active-child slot, or report the count that refused it. Single-threaded object + one transaction = no over-spawn. */
async function reserveSlot(
  host: SessionHost,
  arg: { childKey: string; maxChildren: number; label?: string },
): Promise<{ ok: boolean; activeChildren: number }> {
  await host.ensureSession();
  // No await from here to the transaction: a delete that began during ensureSession is seen (closing.ts).
  assertOpen(host, host.key);
  const res = host.storage.transactionSync(() => {
    const n = countActiveChildren(host);
    if (n >= arg.maxChildren) return { ok: false, activeChildren: n };
    const now = Date.now();
    const data = { childKey: arg.childKey, ...(arg.label ? { label: arg.label } : {}) };
    putFlowRow(host.sql, { id: childFlowId(arg.childKey), kind: CHILD_FLOW, state: "running", data }, "ignore", now);
    host.timers.set(SLOT_TIMER, arg.childKey, now + SLOT_FIRST_CHECK_MS);
    return { ok: true, activeChildren: n + 1 };
  });
  await host.timers.arm();
  return res;
}

async function releaseSlot(host: SessionHost, arg: { childKey: string }): Promise<void> {
  if (!host.meta) return;
  host.storage.transactionSync(() => releaseSlotSync(host, arg.childKey));
  await host.timers.arm();
}

/**
 * A child's completion announce arrives. Idempotent on its key: the child retries the hand-off until
 * it gets an answer, so a retry after a lost reply must not record, deliver or run a turn twice.
 * The dedupe row and everything the announce causes are one transaction.
 */
async function receiveAnnounce(host: SessionHost, h: AnnounceHandoff): Promise<AnnounceHandoffResult> {
  // A sub-agent requester that was already archived or deleted is not brought back as an empty
  // session that nothing would ever archive; the announce has nowhere to go.
  if (!host.meta && host.key.includes(":subagent:")) return { duplicate: false, recorded: false, requesterGone: true };
  // A requester that is gone cannot run a turn: its direct announce goes instead (to the spawn-time route).
  const turn =
    h.delivery === "requester" && h.message && h.event && host.meta ? { message: h.message, event: h.event } : null;
  await host.ensureSession();
  // An announce answered "recorded" must not be wiped by a delete that began meanwhile: refused (409), the
  // child's hand-off timer tries again and finds the key gone or open again (closing.ts).
  assertOpen(host, host.key);
  const result = host.storage.transactionSync((): AnnounceHandoffResult => {
    if (hasFlowRow(host.sql, h.idempotencyKey)) return { duplicate: true, recorded: false };
    // A child of a yielded turn: its result waits for the batch's one resume turn, not a delivery of its own.
    if (absorbIntoBatch(host, h)) return { duplicate: false, recorded: false, batched: true };
    if (turn) {
      acceptForTurn(host, { ...h, ...turn });
      return { duplicate: false, recorded: false, turnQueued: true };
    }
    const now = Date.now();
    releaseSlotSync(host, h.childKey, h.outcome);
    const delivery = h.message ? recordDirectAnnounce(host, { ...h, message: h.message }) : undefined;
    putFlowRow(
      host.sql,
      {
        id: h.idempotencyKey,
        kind: ANNOUNCE_IN_FLOW,
        state: h.message ? "recorded" : "silent",
        data: { childKey: h.childKey, childRunId: h.childRunId, deliveryId: delivery?.id ?? null },
      },
      "fail",
      now,
    );
    return { duplicate: false, recorded: Boolean(h.message), ...(delivery ? { delivery } : {}) };
  });
  await host.timers.arm();
  if (result.recorded) await host.markIndexDirty();
  return result;
}

/**
 * Safety net for a slot: release it when its child does not exist (spawn never completed, or the child was
 * deleted), or exists but will never announce (its announce flow gave up: docs/timers.md) — a slot held for
 * an announce that cannot come would count against maxChildrenPerAgent for good.
 */
async function checkSlot(host: SessionHost, timer: TimerRow): Promise<void> {
  const childKey = timer.ref;
  const row = getFlowRow(host.sql, childFlowId(childKey));
  if (row?.state !== "running") {
    host.timers.clear(SLOT_TIMER, childKey);
    return;
  }
  const stub = host.bindings.SESSIONS.getByName(childKey);
  const child = await stub.getMeta();
  const pending = child ? (await callExtension(stub, "subagent-lifecycle", "announcePending")).pending : false;
  host.storage.transactionSync(() => {
    if (pending) {
      host.timers.set(SLOT_TIMER, childKey, Date.now() + SLOT_RECHECK_MS);
      return;
    }
    if (child && getFlowRow(host.sql, childFlowId(childKey))?.state === "running")
      log.warn("subagent_slot_released", { sessionKey: host.key, childKey, reason: "its announce can no longer come" });
    releaseSlotSync(host, childKey);
  });
}

/** Child slots audited per sweep (src/session/run-audit.ts). */
const AUDITED_SLOTS = 20;

/**
 * The sweeper's audit of this requester's running child slots: each is moved on by its slot check, or by
 * the completion turn its child's announce waits for ("requester" delivery, requester-turn.ts).
 */
function auditSlots(host: SessionHost): FlowFinding[] {
  const rows = host.sql
    .exec<{ id: string; json: string }>(
      "SELECT id, json FROM flows WHERE kind = ? AND state = 'running' LIMIT ?",
      CHILD_FLOW,
      AUDITED_SLOTS,
    )
    .toArray();
  return rows.map(({ id, json }) => {
    const { childKey } = JSON.parse(json) as { childKey: string };
    const prefix = `announce:v1:${childKey}:`;
    const awaitingTurn =
      host.sql
        .exec(
          "SELECT 1 FROM flows WHERE kind = ? AND state IN ('turn_pending', 'turn_queued') AND substr(id, 1, ?) = ? LIMIT 1",
          ANNOUNCE_IN_FLOW,
          prefix.length,
          prefix,
        )
        .toArray().length > 0;
    return awaitingTurn
      ? { flow: id, state: "running", guard: "completion turn" }
      : timerGuard(host, id, "running", SLOT_TIMER, childKey);
  });
}

const requesterRpc = {
  state: (host: SessionHost) => spawnState(host),
  reserve: (host: SessionHost, arg: { childKey: string; maxChildren: number; label?: string }) =>
    reserveSlot(host, arg),
  release: (host: SessionHost, arg: { childKey: string }) => releaseSlot(host, arg),
  receiveAnnounce: (host: SessionHost, arg: AnnounceHandoff) => receiveAnnounce(host, arg),
};

declare module "../session/extensions" {
  interface ExtensionRpc {
    "subagent-requester": typeof requesterRpc;
  }
}

/**
 * The requester is told when an announce could not be delivered to its channel after the outbox's
 * last attempt (OpenClaw only logged it; test/spawn/subagent-announce.test.ts). Once per delivery.
 */
function announceUndelivered(host: SessionHost, d: DeadDelivery): void {
  if (d.kind !== "subagent_announce") return;
  const childKey = childKeyOfAnnounce(d.idempotencyKey);
  const where = d.route.to ? `${d.route.channel} (${d.route.to})` : d.route.channel;
  const text = `[Subagent announce undelivered] The completion announce of ${childKey} could not be delivered to ${where}: ${d.error}. It is recorded above in this session's transcript.`;
  host.storage.transactionSync(() => {
    const noticeId = `announce-dead:${d.id}`;
    if (hasFlowRow(host.sql, noticeId)) return;
    const now = Date.now();
    host.transcript.append(internalMessage(text, childKey), null);
    if (host.meta) {
      host.meta.updatedAt = now;
      host.saveMeta();
    }
    putFlowRow(
      host.sql,
      { id: noticeId, kind: DEAD_NOTICE_FLOW, state: "recorded", data: { deliveryId: d.id, childKey } },
      "fail",
      now,
    );
  });
}

/** The requester's side of its sub-agents: child slots, their checks, and announces handed to it. */
export const requesterExtension: SessionExtension = {
  name: REQUESTER_EXTENSION,
  // Announce dedupe keys outlive any hand-off retry by far (the child retries within minutes until acknowledged).
  finishedFlows: {
    [CHILD_FLOW]: ["ended", "gone"],
    // "batched": kept by a yield batch (src/spawn/yield-batch.ts), which reads it until its resume turn ends.
    [ANNOUNCE_IN_FLOW]: ["recorded", "silent", "turn_done", "fallback", "batched"],
    [DEAD_NOTICE_FLOW]: ["recorded"],
  },
  rpc: requesterRpc,
  audit: auditSlots,
  timers: { [SLOT_TIMER]: {} },
  onTimer: (host, timer) => checkSlot(host, timer),
  onDeliveryDead: announceUndelivered,
};

// ---------------------------------------------------------------- typed calls into a requester's object

function requesterStub(env: Env, requesterKey: string) {
  return env.SESSIONS.getByName(requesterKey);
}

export function getRequesterSpawnState(env: Env, requesterKey: string): Promise<RequesterSpawnState> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "state");
}

export function reserveChildSlot(
  env: Env,
  requesterKey: string,
  childKey: string,
  maxChildren: number,
  label?: string,
): Promise<{ ok: boolean; activeChildren: number }> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "reserve", {
    childKey,
    maxChildren,
    label,
  });
}

export function releaseChildSlot(env: Env, requesterKey: string, childKey: string): Promise<void> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "release", { childKey });
}

export function handAnnounceToRequester(
  env: Env,
  requesterKey: string,
  h: AnnounceHandoff,
): Promise<AnnounceHandoffResult> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "receiveAnnounce", h);
}

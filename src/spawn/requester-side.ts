import type { ChildFinding, ChildOutcome } from "./announce-format";
import { onDeliveryDead, queueDelivery, recordedRoute } from "../channels/outbox";
import { callExtension, registerSessionExtension, type SessionObject } from "../session/session-object";
import type { TimerRow } from "../session/timers";
import type { DeliveryRoute, SessionMeta, TranscriptMessage } from "../session/types";

/**
 * The requester's half of the sub-agent lifecycle, in the requester's own object:
 *  - active-children slots: reserved atomically before a child is created (so concurrent spawns
 *    can never exceed `maxChildrenPerAgent`), released when the child's announce is handed back;
 *  - the announce inbox: records a child's completion announce in this transcript and queues its
 *    delivery to this session's route, exactly once per child run (key `announce:v1:<child>:<run>`);
 *  - the dead-letter notice: when that delivery finally fails, this session is told;
 *  - each child's outcome (status and frozen result), kept on its slot row, so a requester that is
 *    itself a sub-agent can announce all its direct children's outputs (reference §8 item 49).
 * Reached from other objects and the tool through `callExtension` (typed by `requesterRpc`; wrappers below).
 */

export const REQUESTER_EXTENSION = "subagent-requester" as const;
const CHILD_FLOW = "subagent_child";
const ANNOUNCE_IN_FLOW = "subagent_announce_in";
const DEAD_NOTICE_FLOW = "subagent_announce_dead";
/** Re-checks a running slot whose child may never have been created (crash between reserve and spawn) or was deleted. */
const SLOT_TIMER = "subagent-slot";
const SLOT_FIRST_CHECK_MS = 60_000;
const SLOT_RECHECK_MS = 10 * 60_000;

export interface RequesterSpawnState {
  meta: SessionMeta | null;
  activeChildren: number;
}

export interface AnnounceHandoff {
  idempotencyKey: string;
  childKey: string;
  childRunId: string;
  /** The formatted announce; null when the announce step chose silence (the slot is still released). */
  message: string | null;
  /** The requester's route captured at spawn, used when the requester has none recorded now. */
  route?: DeliveryRoute | null;
  /** A thread-bound child's thread: the announce is delivered there (reference §4.8). */
  threadId?: string;
  /** The child's status label and frozen result, kept even when the announce is silent. */
  outcome?: ChildOutcome;
}



export interface AnnounceHandoffResult {
  duplicate: boolean;
  recorded: boolean;
  requesterGone?: boolean;
  delivery?: { id: string; status: string };
}

export function announceIdempotencyKey(childKey: string, childRunId: string): string {
  return `announce:v1:${childKey}:${childRunId}`;
}

/** Child key of an announce idempotency key (run ids hold no ':', child keys do). */
function childKeyOfAnnounce(idempotencyKey: string): string {
  const rest = idempotencyKey.slice("announce:v1:".length);
  return rest.slice(0, rest.lastIndexOf(":"));
}

const childFlowId = (childKey: string) => `child:${childKey}`;

/** Number of this session's children still running (holding a slot). Synchronous: usable inside transactions. */
export function countActiveChildren(host: SessionObject): number {
  if (!host.meta) return 0;
  return host.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM flows WHERE kind = ? AND state = 'running'", CHILD_FLOW).one().n;
}

function internalMessage(text: string, childKey: string): TranscriptMessage {
  return {
    role: "user",
    content: [{ type: "text", text }],
    timestamp: Date.now(),
    provenance: { kind: "internal_system", sourceSessionKey: childKey, sourceTool: "sessions_spawn" },
  };
}

/** Read-only: never creates the requester session (a refused spawn changes nothing). */
function spawnState(host: SessionObject): RequesterSpawnState {
  return { meta: host.meta, activeChildren: countActiveChildren(host) };
}

/** Reserve one active-child slot, or report the count that refused it. Single-threaded object + one transaction = no over-spawn. */
async function reserveSlot(host: SessionObject, arg: { childKey: string; maxChildren: number; label?: string }): Promise<{ ok: boolean; activeChildren: number }> {
  await host.ensureSession();
  const res = host.storage.transactionSync(() => {
    const n = countActiveChildren(host);
    if (n >= arg.maxChildren) return { ok: false, activeChildren: n };
    const now = Date.now();
    host.sql.exec(
      "INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, 'running', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
      childFlowId(arg.childKey), CHILD_FLOW, JSON.stringify({ childKey: arg.childKey, ...(arg.label ? { label: arg.label } : {}) }), now, now,
    );
    host.timers.set(SLOT_TIMER, arg.childKey, now + SLOT_FIRST_CHECK_MS);
    return { ok: true, activeChildren: n + 1 };
  });
  await host.timers.arm();
  return res;
}

/**
 * Called inside the transaction that released a slot, when no child of this session is running any
 * more: the sub-agent lifecycle resumes an announce it deferred for its descendants.
 */
type SettledListener = (host: SessionObject) => void;
const settledListeners: SettledListener[] = [];
export function onChildrenSettled(fn: SettledListener): void {
  settledListeners.push(fn);
}

/**
 * End a child's slot. `outcome` is what it announced; a slot released without one (the child was
 * deleted or never created) is marked `gone` and left out of its parent's results.
 */
function releaseSlotSync(host: SessionObject, childKey: string, outcome?: ChildOutcome): void {
  const id = childFlowId(childKey);
  const row = host.sql.exec<{ state: string; json: string }>("SELECT state, json FROM flows WHERE id = ? AND kind = ?", id, CHILD_FLOW).toArray()[0];
  host.timers.clear(SLOT_TIMER, childKey);
  if (!row || row.state !== "running") return;
  const json = { ...(JSON.parse(row.json) as { childKey: string; label?: string }), ...(outcome ? { outcome } : {}) };
  host.sql.exec("UPDATE flows SET state = ?, json = ?, updated_at = ? WHERE id = ?", outcome ? "ended" : "gone", JSON.stringify(json), Date.now(), id);
  if (countActiveChildren(host) === 0) for (const fn of settledListeners) fn(host);
}

/**
 * This session's direct children spawned in [fromMs, toMs], in creation order, with their outcomes.
 * Children whose slot ended without a result (deleted, never created) are left out: there is nothing
 * of theirs to report, and a child spawned by an earlier run is not this run's work.
 */
export function directChildResults(host: SessionObject, fromMs: number, toMs: number): ChildFinding[] {
  return host.sql
    .exec<{ state: string; json: string }>(
      "SELECT state, json FROM flows WHERE kind = ? AND state IN ('running', 'ended') AND created_at >= ? AND created_at <= ? ORDER BY created_at, rowid",
      CHILD_FLOW, fromMs, toMs,
    )
    .toArray()
    .map((r) => {
      const j = JSON.parse(r.json) as { childKey: string; label?: string; outcome?: ChildOutcome };
      return { childKey: j.childKey, ...(j.label ? { label: j.label } : {}), outcome: r.state === "ended" ? (j.outcome ?? null) : null };
    });
}

async function releaseSlot(host: SessionObject, arg: { childKey: string }): Promise<void> {
  if (!host.meta) return;
  host.storage.transactionSync(() => releaseSlotSync(host, arg.childKey));
  await host.timers.arm();
}

/**
 * A child's completion announce arrives. Idempotent on its key: the child retries the hand-off until
 * it gets an answer, so a retry after a lost reply must not record or deliver twice. Recording,
 * releasing the slot and queueing the delivery are one transaction.
 */
async function receiveAnnounce(host: SessionObject, h: AnnounceHandoff): Promise<AnnounceHandoffResult> {
  // A sub-agent requester that was already archived or deleted is not brought back as an empty
  // session that nothing would ever archive; the announce has nowhere to go.
  if (!host.meta && host.key.includes(":subagent:")) return { duplicate: false, recorded: false, requesterGone: true };
  await host.ensureSession();
  const result = host.storage.transactionSync((): AnnounceHandoffResult => {
    const seen = host.sql.exec("SELECT id FROM flows WHERE id = ?", h.idempotencyKey).toArray().length > 0;
    if (seen) return { duplicate: true, recorded: false };
    const now = Date.now();
    releaseSlotSync(host, h.childKey, h.outcome);
    let delivery: AnnounceHandoffResult["delivery"];
    if (h.message) {
      host.transcript.append(internalMessage(h.message, h.childKey), null);
      host.meta!.updatedAt = now;
      host.saveMeta();
      // Delivered where this session's replies go now; the spawn-time route only when none is recorded.
      // No route at all: the announce stays an internal injection (reference §8 item 44).
      const base = recordedRoute(host) ?? (h.route?.channel ? h.route : null);
      const route = base && h.threadId ? { ...base, threadId: h.threadId } : base;
      if (route) delivery = queueDelivery(host, { kind: "subagent_announce", route, message: h.message, idempotencyKey: h.idempotencyKey });
    }
    host.sql.exec(
      "INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
      h.idempotencyKey, ANNOUNCE_IN_FLOW, h.message ? "recorded" : "silent",
      JSON.stringify({ childKey: h.childKey, childRunId: h.childRunId, deliveryId: delivery?.id ?? null }), now, now,
    );
    return { duplicate: false, recorded: Boolean(h.message), ...(delivery ? { delivery } : {}) };
  });
  await host.timers.arm();
  if (result.recorded) await host.markIndexDirty();
  return result;
}

/** Safety net for a slot: release it when its child does not exist (spawn never completed, or the child was deleted). */
async function checkSlot(host: SessionObject, timer: TimerRow): Promise<void> {
  const childKey = timer.ref;
  const row = host.sql.exec<{ state: string }>("SELECT state FROM flows WHERE id = ?", childFlowId(childKey)).toArray()[0];
  if (!row || row.state !== "running") {
    host.timers.clear(SLOT_TIMER, childKey);
    return;
  }
  const child = await host.bindings.SESSIONS.getByName(childKey).getMeta();
  host.storage.transactionSync(() => {
    if (!child) releaseSlotSync(host, childKey);
    else host.timers.set(SLOT_TIMER, childKey, Date.now() + SLOT_RECHECK_MS);
  });
}

const requesterRpc = {
  state: (host: SessionObject) => spawnState(host),
  reserve: (host: SessionObject, arg: { childKey: string; maxChildren: number; label?: string }) => reserveSlot(host, arg),
  release: (host: SessionObject, arg: { childKey: string }) => releaseSlot(host, arg),
  receiveAnnounce: (host: SessionObject, arg: AnnounceHandoff) => receiveAnnounce(host, arg),
};

declare module "../session/session-object" {
  interface ExtensionRpc {
    "subagent-requester": typeof requesterRpc;
  }
}

registerSessionExtension({
  name: REQUESTER_EXTENSION,
  // Announce dedupe keys outlive any hand-off retry by far (the child retries within minutes until acknowledged).
  finishedFlows: { [CHILD_FLOW]: ["ended", "gone"], [ANNOUNCE_IN_FLOW]: ["recorded", "silent"], [DEAD_NOTICE_FLOW]: ["recorded"] },
  rpc: requesterRpc,
  async onTimer(host, timer) {
    if (timer.kind !== SLOT_TIMER) return false;
    await checkSlot(host, timer);
    return true;
  },
});

/**
 * The requester is told when an announce could not be delivered to its channel after the outbox's
 * last attempt (reference §9, PR #29846: OpenClaw only logged it). Once per delivery.
 */
onDeliveryDead("subagent_announce", (host, d) => {
  const childKey = childKeyOfAnnounce(d.idempotencyKey);
  const where = d.route.to ? `${d.route.channel} (${d.route.to})` : d.route.channel;
  const text = `[Subagent announce undelivered] The completion announce of ${childKey} could not be delivered to ${where}: ${d.error}. It is recorded above in this session's transcript.`;
  host.storage.transactionSync(() => {
    const noticeId = `announce-dead:${d.id}`;
    if (host.sql.exec("SELECT id FROM flows WHERE id = ?", noticeId).toArray().length > 0) return;
    const now = Date.now();
    host.transcript.append(internalMessage(text, childKey), null);
    if (host.meta) {
      host.meta.updatedAt = now;
      host.saveMeta();
    }
    host.sql.exec("INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, ?, 'recorded', ?, ?, ?)", noticeId, DEAD_NOTICE_FLOW, JSON.stringify({ deliveryId: d.id, childKey }), now, now);
  });
});

// ---------------------------------------------------------------- typed calls into a requester's object

function requesterStub(env: Env, requesterKey: string) {
  return env.SESSIONS.getByName(requesterKey);
}

export function getRequesterSpawnState(env: Env, requesterKey: string): Promise<RequesterSpawnState> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "state");
}

export function reserveChildSlot(env: Env, requesterKey: string, childKey: string, maxChildren: number, label?: string): Promise<{ ok: boolean; activeChildren: number }> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "reserve", { childKey, maxChildren, label });
}

export function releaseChildSlot(env: Env, requesterKey: string, childKey: string): Promise<void> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "release", { childKey });
}

export function handAnnounceToRequester(env: Env, requesterKey: string, h: AnnounceHandoff): Promise<AnnounceHandoffResult> {
  return callExtension(requesterStub(env, requesterKey), REQUESTER_EXTENSION, "receiveAnnounce", h);
}

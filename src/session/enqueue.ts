import { agentUnavailable } from "../config/load";
import type { Config } from "../config/schema";
import { SwitchboardError, toRpcError } from "../errors";
import { parseCanonical } from "../keys";
import { log } from "../log";
import { parseSendCommand } from "../policy/send-policy";
import { newSessionId } from "../registry/session-id";
import { sessionIdPlacement } from "../registry/session-index";
import { assertOpen } from "./closing";
import { PUMP_TIMER } from "./core-timers";
import type { SessionExtensions } from "./extensions";
import type { SessionHost } from "./host";
import { recordInboundRoute } from "./inbound-route";
import type { IndexSync } from "./index-sync";
import { armSweep } from "./run-audit";
import { newRunId } from "./run-id";
import { LEASE_MS, type RunRow } from "./run-types";
import type { EnqueueRequest, RunSnapshot, SessionMeta } from "./types";

/** What enqueueing needs beyond the host surface: the object's private schema and metadata setup. */
export interface EnqueueSteps {
  /** Create or migrate the schema (the first write creates the session's storage). */
  ensureSchema(): void;
  /** Create the session's metadata on first use (inside the caller's transaction). */
  createMeta(init: EnqueueRequest["init"], now: number): SessionMeta;
  indexSync: IndexSync;
  /** A thread bound to a sub-agent runs its inbound messages there (SessionExtension `forwardInbound`). */
  extensions: SessionExtensions;
}

/**
 * A new session's metadata, from its canonical key and the caller's initial fields. Its sessionId shares
 * the row's index shard, so the first index write is one call (src/registry/session-id.ts).
 */
export function newSessionMeta(key: string, cfg: Config, init: EnqueueRequest["init"], now: number): SessionMeta {
  const parsed = parseCanonical(key, cfg);
  return {
    key: parsed.canonicalKey,
    agentId: parsed.agentId,
    sessionId: newSessionId(parsed.canonicalKey, sessionIdPlacement(cfg, parsed.agentId)),
    kind: parsed.kind,
    createdAt: now,
    updatedAt: now,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    systemSent: false,
    abortedLastRun: false,
    ...(parsed.kind === "group" && parsed.channel ? { channel: parsed.channel, chatType: parsed.chatType } : {}),
    ...init,
  };
}

/**
 * Queue a run. The run row, the session's creation, the inbound route and the queue's safety timer
 * are one transaction: either the message is durably queued or nothing happened.
 * An `idempotencyKey` seen before returns the run it created — never a second run.
 */
export async function enqueueRun(
  host: SessionHost,
  steps: EnqueueSteps,
  req: EnqueueRequest,
  alsoInTransaction?: (host: SessionHost, queued: RunSnapshot) => void,
): Promise<RunSnapshot> {
  const forwarded = await steps.extensions.forwardInbound(host, req);
  if (forwarded) return forwarded;
  // No await from here to the transaction: a delete or archive that began is seen (closing.ts).
  assertOpen(host, host.key);
  // An agent whose runtime cannot run here (OpenClaw's ACP harnesses) takes no runs: refused by name, and
  // nothing is stored (GET /healthz warns about it; the rest of the gateway runs).
  const unavailable =
    req.input.kind === "command" ? null : agentUnavailable(host.cfg, parseCanonical(host.key, host.cfg).agentId);
  if (unavailable) throw toRpcError(new SwitchboardError("conflict", unavailable));
  // Checked before the schema is created: a refused step leaves no storage behind.
  if (req.onlyIfExists && (!host.hasStorage || !host.meta))
    throw toRpcError(new SwitchboardError("not_found", `Session not found: ${host.key}`));
  steps.ensureSchema();
  // An owner's standalone `/send on|off|inherit` is a command run (test/http/token-scopes.test.ts): it takes its turn in
  // the queue like any message, but is answered by the send-policy extension, never by the model.
  if (req.senderIsOwner && req.input.kind === "inbound" && parseSendCommand(req.input.message))
    req = { ...req, input: { ...req.input, kind: "command" } };
  const now = Date.now();
  let created = false;
  const snap = host.storage.transactionSync((): RunSnapshot => {
    if (req.idempotencyKey) {
      const existing = host.sql
        .exec<RunRow>("SELECT * FROM runs WHERE idempotency_key = ?", req.idempotencyKey)
        .toArray()[0];
      if (existing) return host.snapshot(existing);
    }
    let m = host.meta;
    if (!m) {
      m = steps.createMeta(req.init, now);
      created = true;
    }
    recordInboundRoute(m, req.input);
    m.updatedAt = now;
    host.saveMeta();
    const id = newRunId(m.key);
    const qseq = host.sql.exec<{ q: number }>("SELECT COALESCE(MAX(qseq), 0) + 1 AS q FROM runs").one().q;
    host.sql.exec(
      `INSERT INTO runs (id, qseq, kind, status, input_json, created_at, idempotency_key) VALUES (?, ?, ?, 'queued', ?, ?, ?)`,
      id,
      qseq,
      req.input.kind,
      JSON.stringify(req.input),
      now,
      req.idempotencyKey ?? null,
    );
    // The run's start is durable: it begins after this call is answered (below), and if this instance is
    // evicted first the alarm starts it at once. Behind a running run the queue moves on when that run ends
    // (its lease covers a lost executor), so then the timer is only a late safety net and fires no alarm now.
    const idle = host.sql.exec("SELECT 1 FROM runs WHERE status = 'running' LIMIT 1").toArray().length === 0;
    host.timers.set(PUMP_TIMER, "queue", idle ? now : now + LEASE_MS, undefined, { keepEarlier: true });
    // A queued run is open work: the sweeper audits it until it ends, even if the pump timer dies (run-audit.ts).
    armSweep(host);
    // The registry row is stale from here: its write is owed durably, with the change that causes it.
    steps.indexSync.schedule(now);
    const queued = host.snapshot(host.runRow(id)!);
    // State that must exist exactly when this run does (a spawned child's attachments, a send's task), local callers only.
    alsoInTransaction?.(host, queued);
    host.events.run(queued, req.input);
    return queued;
  });
  await host.timers.arm();
  // A new session is listed before its first send is answered. A known session's row write is owed by the
  // timer row written above, so it stays off the caller's path (test/registry/index-shards.test.ts).
  const indexed = host.markIndexDirty({ immediate: created });
  if (created) await indexed;
  else
    indexed.catch((err) =>
      log.warn("registry_write_failed", { sessionKey: host.key, error: err, next: "the index timer retries it" }),
    );
  // The run starts once this call is answered, not before: the writes of its start (the claim, its lease) would
  // otherwise join the commit the answer waits for (docs/scale.md, "Where a send's time goes"). If this instance
  // dies first, the pump timer written above (due now) starts it; both starting it is harmless, the claim
  // takes a queued run only while none is running, in one transaction (src/session/run-queue.ts).
  setTimeout(() => host.kick(), 0);
  return snap;
}

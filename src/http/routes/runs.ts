import { type Context, Hono } from "hono";
import { z } from "zod";
import { forbidden, fromRpcError, notFound, SwitchboardError } from "../../errors";
import { mintRunToken } from "../../runners/run-token";
import { completeRun, runCompletionSchema } from "../../runners/webhook-runner";
import { capText } from "../../session/byte-budget";
import { callExtension } from "../../session/extensions";
import { type RunSnapshot, runHeartbeatSchema, runSnapshotSchema } from "../../session/run-schema";
import { MAX_WAIT_MS } from "../../session/run-types";
import { FINAL_STATUSES } from "../../session/types";
import { abortRunHandle } from "../../tasks/run-abort";
import type { AppEnv } from "../app-env";
import { handleOwner } from "../handle-owner";
import type { Principal } from "../principal";
import { routeDoc } from "../route-doc";
import { RUN_ABORT_TEXT, RUN_COMPLETE_TEXT, RUN_HEARTBEAT_TEXT, RUN_WAIT_TEXT } from "../route-texts";
import { intQuery, valid } from "../validate";

export const runParam = z.object({ id: z.string().max(1024).describe("Run id (`runId` of the run)") });

/** The canonical session key of the run this request names, within the caller's scope (src/http/handle-owner.ts). */
export function runTarget(c: Context<AppEnv>): string {
  return handleOwner(c.get("cfg"), c.get("principal"), c.req.param("id") ?? "", "Run");
}

/** The run token of exactly this run (its completion, its heartbeat): any other token is a 403. */
function ownRunToken(c: Context<AppEnv>, runId: string, what: string): Extract<Principal, { role: "run" }> {
  const principal = c.get("principal");
  if (principal.role !== "run" || principal.runId !== runId)
    throw forbidden(`Only the run token of run ${runId} may ${what}`);
  return principal;
}

/** A run's answer: found, or the 404 every run route gives. */
function found(id: string, run: RunSnapshot | null): RunSnapshot {
  if (!run) throw notFound(`Run not found: ${id}`);
  return run;
}

const waitQuery = z.object({
  timeoutMs: intQuery({ min: 0, max: MAX_WAIT_MS, def: 30_000, description: "Longest wait" }),
});

/** `/v1/runs`: read, wait for, abort, and (a webhook runtime, with its run token) complete a run. */
export const runsApp = new Hono<AppEnv>()
  .get(
    "/:id",
    routeDoc({
      tag: "runs",
      summary: "A run's status and outcome",
      ok: { description: "The run", schema: runSnapshotSchema },
      errors: [400, 403, 404],
    }),
    valid("param", runParam),
    async (c) => {
      const key = runTarget(c);
      const id = c.req.valid("param").id;
      return c.json(found(id, await c.env.SESSIONS.getByName(key).getRun(id)));
    },
  )
  .get(
    "/:id/wait",
    routeDoc({
      tag: "runs",
      summary: "Wait server-side for a run to end",
      description: RUN_WAIT_TEXT,
      ok: { description: "The run", schema: runSnapshotSchema },
      errors: [400, 403, 404],
    }),
    valid("param", runParam),
    valid("query", waitQuery),
    async (c) => {
      const key = runTarget(c);
      const id = c.req.valid("param").id;
      const timeoutMs = c.req.valid("query").timeoutMs;
      let run: RunSnapshot | null;
      try {
        run = await c.env.SESSIONS.getByName(key).waitRun(id, timeoutMs);
      } catch (err) {
        const e = fromRpcError(err);
        if (e instanceof SwitchboardError) throw e;
        // The object restarted while holding this wait (eviction, deploy). The waiter was memory but the
        // run is durable: answer with the run as it is now (like a wait that timed out); the client waits again.
        run = await c.env.SESSIONS.getByName(key).getRun(id);
      }
      return c.json(found(id, run));
    },
  )
  .post(
    "/:id/abort",
    routeDoc({
      tag: "runs",
      summary: "Abort a queued or running run",
      description: RUN_ABORT_TEXT,
      ok: { description: "The run", schema: runSnapshotSchema },
      errors: [400, 403, 404],
    }),
    valid("param", runParam),
    async (c) => {
      const key = runTarget(c);
      const id = c.req.valid("param").id;
      // The one abort of every surface (src/tasks/run-abort.ts): a spawn's run cancels its ledger task and its
      // descendants; a run that already ended is answered as it is, unchanged (the abort was a no-op).
      return c.json(found(id, (await abortRunHandle(c.env, key, id)).run));
    },
  )
  // A webhook runtime that answered 202 hands in the run's reply (or error) here, with the run token it was
  // given (docs/webhooks.md). The token stops working once the run has ended, so a second completion is a 401.
  .post(
    "/:id/complete",
    routeDoc({
      tag: "runs",
      summary: "Complete a webhook run (run token only)",
      description: RUN_COMPLETE_TEXT,
      ok: { description: "The ended run", schema: runSnapshotSchema },
      // No 404: a valid run token names a run that exists (and a 401 once it ended).
      errors: [400, 403, 409, 413],
    }),
    valid("param", runParam),
    valid("json", runCompletionSchema),
    async (c) => {
      const runId = c.req.valid("param").id;
      const principal = ownRunToken(c, runId, "complete it");
      const completion = c.req.valid("json");
      const run = found(runId, await completeRun(c.env, principal.sessionKey, runId, completion, principal.agentId));
      // The run may have ended another way (deadline, abort) between the token check and now.
      const wanted = completion.error !== undefined ? "error" : "ok";
      // The stored reply is the completion's, cut to the message cap when larger (docs/limits.md).
      const stored = capText(completion.reply ?? "", c.get("cfg").limits.maxMessageBytes);
      if (run.status !== wanted || (wanted === "ok" && (run.reply ?? "") !== stored))
        throw new SwitchboardError("conflict", `Run ${runId} already ended (${run.status})`);
      return c.json(run);
    },
  )
  // The lease of a run held by its runtime, and the token's re-issue (key rotation: a token signed with
  // SIGNING_SECRET_PREVIOUS is exchanged for one signed with SIGNING_SECRET; src/runners/run-token.ts).
  .post(
    "/:id/heartbeat",
    routeDoc({
      tag: "runs",
      summary: "Renew a webhook run's lease and get a fresh run token (run token only)",
      description: RUN_HEARTBEAT_TEXT,
      ok: { description: "The renewed lease", schema: runHeartbeatSchema },
      errors: [400, 403, 409],
    }),
    valid("param", runParam),
    async (c) => {
      const runId = c.req.valid("param").id;
      const principal = ownRunToken(c, runId, "renew it");
      const beat = await callExtension(
        c.env.SESSIONS.getByName(principal.sessionKey),
        "webhook-runtime",
        "heartbeat",
        runId,
      );
      // The token was checked against the run a moment ago: a run that ended since has no lease to renew. (A run
      // re-queued after a lost executor is still its runtime's: it answers with no lease until it runs again.)
      if (!beat.run || FINAL_STATUSES.has(beat.run.status))
        throw new SwitchboardError("conflict", `Run ${runId} already ended (${beat.run?.status ?? "gone"})`);
      const runToken = await mintRunToken(c.env.SIGNING_SECRET, {
        runId,
        sessionKey: principal.sessionKey,
        agentId: principal.agentId,
        isSubagent: principal.isSubagent,
        expiresAt: beat.deadline,
      });
      return c.json({ run: beat.run, runToken, deadline: beat.deadline, leaseExpiresAt: beat.leaseExpiresAt });
    },
  );

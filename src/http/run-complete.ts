import type { Hono } from "hono";
import { forbidden, notFound, SwitchboardError } from "../errors";
import { completeRun, parseRunCompletion } from "../runners/webhook-runner";
import { capText } from "../session/byte-budget";
import type { AppEnv } from "./app-env";
import { jsonBody, methodNotAllowed } from "./route-helpers";

/**
 * `POST /v1/runs/{runId}/complete` (docs/contract.md, "Endpoints"): a webhook runtime that answered 202 hands in the
 * run's reply (or error) here, with the run token it was given. Only that run's token may complete it;
 * the token itself stops working once the run has ended, so a second completion is a 401.
 */
export function runCompleteRoutes(app: Hono<AppEnv>): void {
  app.post("/v1/runs/:id/complete", async (c) => {
    const runId = c.req.param("id");
    const principal = c.get("principal");
    if (principal.role !== "run" || principal.runId !== runId)
      throw forbidden(`Only the run token of run ${runId} may complete it`);
    const completion = parseRunCompletion(await jsonBody(c));
    const run = await completeRun(c.env, principal.sessionKey, runId, completion, principal.agentId);
    if (!run) throw notFound(`Run not found: ${runId}`);
    // The run may have ended another way (deadline, abort) between the token check and now.
    const wanted = completion.error !== undefined ? "error" : "ok";
    // The stored reply is the completion's, cut to the message cap when larger (docs/limits.md).
    const stored = capText(completion.reply ?? "", c.get("cfg").limits.maxMessageBytes);
    if (run.status !== wanted || (wanted === "ok" && (run.reply ?? "") !== stored)) {
      throw new SwitchboardError("conflict", `Run ${runId} already ended (${run.status})`);
    }
    return c.json(run);
  });
  app.all("/v1/runs/:id/complete", () => methodNotAllowed("POST"));
}

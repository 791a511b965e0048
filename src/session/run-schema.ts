import { z } from "zod";

/**
 * A run's states (docs/contract.md, "Runs"): `queued → running → ok | error | timeout | aborted | lost`.
 * The last five are final. `lost`: nothing executes the run any more and nothing would end it otherwise —
 * its executor was lost twice, or its runtime stopped renewing its lease (src/session/run-audit.ts).
 */
export const RUN_STATUSES = ["queued", "running", "ok", "error", "timeout", "aborted", "lost"] as const;

/** Why a run exists; follow-up steps (agent-to-agent flow, announces) dispatch on it. */
export const RUN_KINDS = [
  "inbound",
  "send",
  "a2a_turn",
  "a2a_announce",
  "subagent_task",
  "subagent_announce",
  "subagent_completion",
  "command",
] as const;

/**
 * A run as `GET /v1/runs/{id}` (and wait, abort, complete) answers it. The type is inferred from this
 * schema and the OpenAPI `Run` component is generated from it; strict, so a field added to the
 * snapshot but not here fails test/http/openapi-contract.test.ts.
 */
export const runSnapshotSchema = z
  .strictObject({
    runId: z.string(),
    sessionKey: z.string(),
    status: z.enum(RUN_STATUSES),
    kind: z.enum(RUN_KINDS),
    reply: z.string().optional().describe("The assistant's final text (status ok)"),
    error: z.string().optional().describe("Why the run failed (status error, timeout, aborted, lost)"),
    createdAt: z.number().int().describe("Epoch milliseconds"),
    startedAt: z.number().int().optional(),
    endedAt: z.number().int().optional(),
    usage: z
      .strictObject({ input: z.number().int(), output: z.number().int(), totalTokens: z.number().int() })
      .optional(),
    model: z.string().optional(),
    taskId: z
      .string()
      .optional()
      .describe(
        "A sub-agent's task run (`kind: subagent_task`): its task in the requester's ledger (`GET /v1/tasks/{taskId}`). Aborting this run cancels that task and every task below it (docs/protocols.md, \"One handle\")",
      ),
  })
  .meta({ id: "Run", description: "A run's status and outcome." });

export type RunSnapshot = z.infer<typeof runSnapshotSchema>;

/** `POST /v1/runs/{id}/heartbeat` (a webhook runtime holding the run): the run, its renewed lease, a fresh token. */
export const runHeartbeatSchema = z
  .strictObject({
    run: runSnapshotSchema,
    runToken: z.string().describe("A fresh run token, signed with the current SIGNING_SECRET: use it from now on."),
    deadline: z.number().int().nullable().describe("Epoch ms when the run ends `timeout`; null: no deadline."),
    leaseExpiresAt: z
      .number()
      .int()
      .nullable()
      .describe(
        "Epoch ms until which the run is held without another heartbeat; null: no lease to renew (the run has a deadline, or its runtime has not answered 202 yet).",
      ),
  })
  .meta({ id: "RunHeartbeat", description: "A renewed run lease." });

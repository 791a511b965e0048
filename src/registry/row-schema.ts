import { z } from "zod";

const SESSION_KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

/**
 * A session's row: what `sessions_list` lists, `GET /v1/sessions/{key}` and `PATCH` answer, and the
 * index stores (test/tools/sessions-list.test.ts). The type is inferred from this schema and the OpenAPI
 * `Session` component is generated from it, so the row and its documentation cannot drift apart.
 * Strict: a field the code adds without adding it here fails test/http/openapi-contract.test.ts.
 */
export const sessionRowSchema = z
  .strictObject({
    key: z
      .string()
      .describe(
        'The canonical key, `agent:<agentId>:<rest>` (an agent\'s main session is `agent:<id>:main`); under `session.scope: "global"` the shared DM bucket shows as `main`',
      ),
    agentId: z.string(),
    kind: z.enum(SESSION_KINDS),
    channel: z
      .string()
      .describe(
        "A group's recorded channel (else its key's), a direct chat's last route's; `internal` for cron, hook and node sessions; `unknown` if none",
      ),
    displayName: z.string().optional(),
    label: z.string().optional(),
    updatedAt: z.number().int().describe("Last activity, epoch milliseconds"),
    sessionId: z.string(),
    model: z.string().optional(),
    contextTokens: z.number().int().optional(),
    totalTokens: z.number().int(),
    inputTokens: z.number().int(),
    outputTokens: z.number().int(),
    thinkingLevel: z.string().optional(),
    verboseLevel: z.string().optional(),
    systemSent: z.boolean(),
    abortedLastRun: z.boolean(),
    sendPolicy: z.enum(["allow", "deny"]).optional().describe("Per-session override of session.sendPolicy"),
    lastChannel: z.string().optional(),
    lastTo: z.string().optional(),
    deliveryContext: z
      .strictObject({
        channel: z.string(),
        to: z.string().optional(),
        accountId: z.string().optional(),
        threadId: z.string().optional(),
      })
      .optional()
      .describe("Where replies of this session are delivered"),
    transcriptPath: z.string().describe("`GET` path of the transcript as JSON lines"),
    spawnedBy: z.string().optional().describe("Key of the session that spawned this sub-agent"),
    spawnDepth: z.number().int().optional(),
    status: z
      .string()
      .optional()
      .describe(
        "Sub-agent task state, for children: `running`, `done`, `failed` (an aborted task too), `timeout` or `lost` (nothing executes it any more)",
      ),
    startedAt: z.number().int().optional(),
    endedAt: z.number().int().optional(),
    runtimeMs: z.number().int().optional(),
    archived: z
      .boolean()
      .optional()
      .describe("The session was archived: its storage is freed and it is read from the archive bucket"),
    messages: z
      .array(z.record(z.string(), z.unknown()))
      .optional()
      .describe("Last messages, when sessions_list was asked for them (messageLimit)"),
  })
  .meta({ id: "Session", description: "A session row, as sessions_list lists it." });

export type SessionRow = z.infer<typeof sessionRowSchema>;

import { z } from "zod";
import { ERROR_TYPES } from "../errors";
import { sessionRowSchema } from "../registry/row-schema";
import { runSummarySchema } from "../session/runs-list-rpc";
import { taskRecordSchema } from "../tasks/task-types";

/**
 * Response bodies of the HTTP API as zod schemas. Routes type their answers with these (`satisfies`),
 * /openapi.json is generated from them, and test/http/openapi-contract.test.ts checks real responses against
 * the generated document. Objects are strict: a field a route adds without adding it here fails that test.
 */

export const errorEnvelopeSchema = z
  .strictObject({
    ok: z.literal(false),
    error: z.strictObject({
      type: z.enum(ERROR_TYPES),
      message: z.string().describe("Says what was wrong; a 400 names the field first (`limit: must be >= 1`)"),
    }),
  })
  .meta({ id: "Error", description: "The one error envelope of every endpoint." });

export const healthSchema = z.strictObject({
  ok: z.literal(true),
  agents: z.array(z.string()).describe("Configured agent ids, unavailable ones included (GET /v1/agents says which)"),
  warnings: z
    .array(z.string())
    .optional()
    .describe(
      "Operator token only. What of CONFIG the gateway cannot use as written: agents that cannot run and models that do not resolve (named), then values mapped or clamped, then every ignored key, grouped by the object holding it (docs/openclaw-carry-over.md)",
    ),
  archive: z
    .strictObject({ bucket: z.boolean(), note: z.string().optional() })
    .optional()
    .describe("Operator token only: whether the archive bucket is bound"),
});

export const acceptedSchema = z
  .strictObject({ runId: z.string(), status: z.literal("accepted"), sessionKey: z.string() })
  .meta({ id: "Accepted", description: "A run was queued; follow it with GET /v1/runs/{id}/wait." });

export const sessionsPageSchema = z.strictObject({
  count: z.number().int(),
  sessions: z.array(sessionRowSchema),
  nextCursor: z.string().nullable().describe("Pass as `cursor` for the next page; null on the last page"),
});

export const deletedSchema = z.strictObject({ ok: z.literal(true), deleted: z.string() });

/** One transcript message in sessions_history's sanitised shape (role, content, timestamp, …). */
const historyMessageSchema = z.record(z.string(), z.unknown());

export const historyPageSchema = z
  .strictObject({
    sessionKey: z.string(),
    sessionId: z.string().optional(),
    archived: z.literal(true).optional().describe("Read from the archive bucket"),
    messages: z.array(historyMessageSchema),
    truncated: z.boolean(),
    droppedMessages: z.boolean(),
    contentTruncated: z.boolean(),
    contentRedacted: z.boolean(),
    bytes: z.number().int(),
    hasMore: z.boolean().describe("Older messages exist: call again with `before: nextBefore`"),
    nextBefore: z.number().int().nullable(),
  })
  .meta({ id: "HistoryPage", description: "A sanitized page of a transcript (the shape of sessions_history)." });

const DELIVERY_KINDS = ["reply", "announce", "subagent_announce", "a2a_push"] as const;
export const DELIVERY_STATUSES = ["pending", "delivered", "blocked", "dead"] as const;

export const deliverySchema = z
  .strictObject({
    id: z.string(),
    idempotencyKey: z.string(),
    kind: z.enum(DELIVERY_KINDS),
    channel: z.string(),
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.number().int(),
    lastError: z.string().nullable(),
    createdAt: z.number().int(),
    updatedAt: z.number().int(),
    deliveredAt: z.number().int().nullable(),
    payload: z
      .strictObject({
        channel: z.string(),
        to: z.string().nullable(),
        accountId: z.string().nullable().optional(),
        threadId: z.string().nullable().optional(),
        message: z.string(),
        sessionKey: z.string(),
        kind: z.enum(DELIVERY_KINDS),
        idempotencyKey: z.string(),
      })
      .describe(
        "The body POSTed to the channel webhook (docs/webhooks.md); for `a2a_push`, `to` is the receiver's URL and `message` the A2A notification's body (docs/protocols.md)",
      ),
  })
  .meta({ id: "Delivery", description: "One outbound delivery of the outbox." });

export const deliveriesSchema = z.strictObject({
  sessionKey: z.string(),
  count: z.number().int(),
  deliveries: z.array(deliverySchema),
  truncated: z
    .literal(true)
    .optional()
    .describe("The listing reached its byte budget (2 MiB, docs/limits.md) before `limit` rows"),
});

const deadTimerFields = {
  kind: z.string(),
  ref: z.string(),
  attempts: z.number().int(),
  lastError: z.string(),
  firstFailedAt: z.number().int(),
  diedAt: z.number().int(),
  retryable: z.boolean().describe("An operator may re-queue it"),
};
export const deadTimerSchema = z
  .strictObject(deadTimerFields)
  .meta({ id: "DeadTimer", description: "A timer that gave up after its attempts (docs/timers.md)." });

export const deadTimersSchema = z.strictObject({
  sessionKey: z.string(),
  count: z.number().int(),
  timers: z.array(deadTimerSchema),
});

export const retriedTimerSchema = z.strictObject({ ...deadTimerFields, retried: z.literal(true) });

export const attachmentsSchema = z.strictObject({
  sessionKey: z.string(),
  count: z.number().int(),
  attachments: z.array(
    z.strictObject({
      name: z.string(),
      mimeType: z.string().optional(),
      bytes: z.number().int(),
      sha256: z.string().describe("Lowercase hex"),
    }),
  ),
});

export const agentsSchema = z.strictObject({
  defaultAgentId: z.string(),
  agents: z.array(
    z.strictObject({
      id: z.string(),
      name: z.string().optional(),
      default: z.boolean(),
      model: z.string().describe("Its model reference (its own, else agents.defaults.model)"),
      sandboxed: z.boolean().describe("Some of its sessions run sandboxed (`sandbox` is non-main or all)"),
      sandbox: z.enum(["off", "non-main", "all"]).describe("`non-main`: every session but the agent's main one"),
      runtime: z.string().describe("`model`, `webhook`, or the unsupported type an unavailable agent asked for"),
      available: z.boolean().describe("False when its runtime cannot run here: messages to its sessions are refused"),
      unavailableReason: z.string().optional(),
    }),
  ),
});

export const toolCatalogSchema = z.strictObject({
  sessionKey: z.string().describe("The requester session the catalog was built for"),
  tools: z.array(
    z.strictObject({
      name: z.string(),
      description: z.string(),
      parameters: z.record(z.string(), z.unknown()).describe("JSON Schema of the arguments"),
    }),
  ),
});

export const toolResultSchema = z
  .strictObject({
    ok: z.literal(true),
    result: z.strictObject({
      content: z.array(z.strictObject({ type: z.literal("text"), text: z.string() })),
      details: z.unknown().describe("The tool's payload; the same as `content[0].text` parsed"),
    }),
  })
  .meta({ id: "ToolResult", description: "A tool's answer (refusals defined by the spec are results too)." });

export type AcceptedBody = z.infer<typeof acceptedSchema>;
export type SessionsPageBody = z.infer<typeof sessionsPageSchema>;
export type HistoryBody = z.infer<typeof historyPageSchema>;

export const effectiveConfigSchema = z
  .strictObject({
    config: z
      .record(z.string(), z.unknown())
      .describe("CONFIG after defaults and validation, with every secret replaced by `[redacted]`"),
    warnings: z
      .array(z.string())
      .describe(
        "What of CONFIG the gateway cannot use as written: agents that cannot run and models that do not resolve (named), then values mapped or clamped, then every ignored key, grouped by the object holding it (docs/openclaw-carry-over.md)",
      ),
  })
  .meta({ id: "EffectiveConfig" });

export const runsPageSchema = z.strictObject({
  sessionKey: z.string(),
  count: z.number().int(),
  runs: z.array(runSummarySchema),
});

/** An MCP Server Card (the server-card extension's v2 schema), as `/.well-known/mcp/server-card.json` serves it. */
export const mcpServerCardSchema = z
  .strictObject({
    $schema: z.literal("https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"),
    name: z.string().describe("Reverse-DNS name: the host name reversed, then `/switchboard`"),
    version: z.string(),
    title: z.string(),
    description: z.string(),
    remotes: z.array(
      z.strictObject({
        type: z.literal("streamable-http"),
        url: z.string().describe("The MCP endpoint, `/mcp` on this host"),
        headers: z.array(
          z.strictObject({
            name: z.string(),
            description: z.string(),
            isRequired: z.boolean(),
            isSecret: z.boolean(),
          }),
        ),
        supportedProtocolVersions: z.array(z.string()),
      }),
    ),
    _meta: z.strictObject({
      "switchboard/tools": z
        .array(z.strictObject({ name: z.string(), description: z.string() }))
        .describe("Every tool of the registry; which a caller gets depends on its session (tools/list)"),
    }),
  })
  .meta({ id: "McpServerCard" });

/** The site's MCP Catalog (`/.well-known/mcp/catalog.json`): one entry, this server's card. */
export const mcpCatalogSchema = z
  .strictObject({
    specVersion: z.literal("draft"),
    entries: z.array(
      z.strictObject({
        identifier: z.string(),
        displayName: z.string(),
        type: z.literal("application/mcp-server-card+json"),
        url: z.string(),
      }),
    ),
  })
  .meta({ id: "McpCatalog" });

/** `GET /v1/sessions/{key}/tasks` (src/http/routes/tasks.ts; docs/tasks.md). */
export const taskListSchema = z
  .strictObject({
    sessionKey: z.string().describe("The ledger's session"),
    tasks: z
      .array(taskRecordSchema)
      .describe("Open tasks and those updated within `recentMinutes`, newest update first"),
  })
  .meta({ id: "TaskList", description: "A session's task ledger." });

/** `POST /v1/tasks/{taskId}/cancel` (src/http/routes/tasks.ts; docs/tasks.md, "Cancel"). */
export const taskCancelSchema = z
  .strictObject({
    taskId: z.string(),
    found: z.literal(true),
    cancelled: z.boolean().describe("False when the task had already ended (or has no child session to stop)"),
    reason: z
      .string()
      .optional()
      .describe('Why not: "Task is already terminal." or "Task has no cancellable child session."'),
  })
  .meta({ id: "TaskCancel", description: "What a cancel did: the task and every task below it are cancelled." });

const rpcId = z.union([z.string(), z.number(), z.null()]);
/** A JSON-RPC 2.0 answer, a result or an error: the one shape of /mcp's and A2A's answers, as component `id`. */
export function jsonRpcAnswerSchema(id: string) {
  return z
    .union([
      z.strictObject({ jsonrpc: z.literal("2.0"), id: rpcId, result: z.unknown() }),
      z.strictObject({
        jsonrpc: z.literal("2.0"),
        id: rpcId,
        error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
      }),
    ])
    .meta({ id });
}
/** A JSON-RPC 2.0 request to an agent's A2A endpoint; the A2A SDK's transport checks the method and its params. */
export const a2aRpcRequestSchema = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: rpcId.optional(),
    method: z
      .string()
      .describe("SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask (A2A v1 JSON-RPC binding)"),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: "A2AJsonRpcRequest" });

/** Its answer: a result (a Task, or `{task}` / `{message}` for SendMessage) or an A2A error (docs/protocols.md). */
export const a2aRpcResponseSchema = jsonRpcAnswerSchema("A2AJsonRpcResponse");

/** An A2A error of the HTTP+JSON binding (the SDK's `toRestErrorBody`: a google.rpc.Status with an ErrorInfo detail). */
export const a2aRestErrorSchema = z
  .strictObject({
    error: z.strictObject({
      code: z.number().int().describe("The HTTP status"),
      status: z.string().describe("NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION, …"),
      message: z.string(),
      details: z.array(z.record(z.string(), z.unknown())).describe("An ErrorInfo naming the A2A error (`reason`)"),
    }),
  })
  .meta({ id: "A2ARestError" });

/** A refusal on the HTTP+JSON binding: an A2A error, or our envelope for authentication, scope and limits. */
export const a2aRestRefusalSchema = z.union([a2aRestErrorSchema, errorEnvelopeSchema]);

/** An agent's A2A card (A2A v1, JSON form of the SDK's `AgentCard`): public, nothing secret (src/a2a/card.ts). */
export const a2aCardSchema = z
  .strictObject({
    name: z.string(),
    description: z.string(),
    supportedInterfaces: z.array(
      z.strictObject({
        url: z.string(),
        protocolBinding: z.enum(["JSONRPC", "HTTP+JSON"]),
        protocolVersion: z.string(),
      }),
    ),
    version: z.string(),
    documentationUrl: z.string(),
    capabilities: z.strictObject({
      streaming: z.boolean(),
      pushNotifications: z.boolean(),
      extendedAgentCard: z.boolean(),
    }),
    securitySchemes: z.record(
      z.string(),
      z.strictObject({
        httpAuthSecurityScheme: z.strictObject({
          description: z.string(),
          scheme: z.string(),
          bearerFormat: z.string(),
        }),
      }),
    ),
    securityRequirements: z.array(z.strictObject({ schemes: z.record(z.string(), z.strictObject({})) })),
    defaultInputModes: z.array(z.string()),
    defaultOutputModes: z.array(z.string()),
    skills: z.array(
      z.strictObject({
        id: z.string(),
        name: z.string(),
        description: z.string(),
        tags: z.array(z.string()),
        inputModes: z.array(z.string()),
        outputModes: z.array(z.string()),
      }),
    ),
  })
  .meta({ id: "A2AAgentCard" });

/**
 * `GET /openapi.json`: this document's own shape, to the depth a client reads before it walks `paths`
 * (the OpenAPI 3.1 meta-schema validates the rest: test/node/openapi-document.test.ts).
 */
export const openApiDocumentSchema = z
  .strictObject({
    openapi: z.literal("3.1.0"),
    info: z.strictObject({ title: z.string(), version: z.string(), description: z.string() }),
    servers: z.array(z.strictObject({ url: z.string() })).describe("This Worker's origin, as the request reached it"),
    security: z.array(z.record(z.string(), z.array(z.string()))),
    tags: z.array(z.strictObject({ name: z.string() })),
    paths: z
      .record(z.string(), z.record(z.string(), z.unknown()))
      .describe("Every operation: `path → method → operation`"),
    components: z.strictObject({
      schemas: z.record(z.string(), z.unknown()),
      securitySchemes: z.record(z.string(), z.unknown()),
    }),
  })
  .meta({ id: "OpenApiDocument" });

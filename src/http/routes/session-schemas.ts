import { z } from "zod";
import { invalid } from "../../errors";
import { intQuery } from "../validate";

/** The request schemas of the session routes (src/http/routes/sessions.ts); the typed client reuses the first two. */

export const inboundMessage = z.object({
  // Its size cap (limits.maxMessageBytes, a 413) is checked after parsing; the 2 MB body limit bounds the parse.
  message: z.string().min(1, "message required"),
  channel: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[a-z0-9_-]+$/i, "channel must match [a-z0-9_-]+")
    .optional(),
  to: z.string().max(512).optional(),
  accountId: z.string().max(256).optional(),
  threadId: z
    .union([z.string().max(256), z.number().int().min(-Number.MAX_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER)])
    .optional(),
  chatType: z.enum(["direct", "group", "channel"]).optional(),
  displayName: z.string().max(512).optional(),
  deliver: z.boolean().optional(),
  idempotencyKey: z.string().min(1).max(256).optional(),
  /** The sender is the session's owner: owner-only commands (`/send on|off|inherit`) apply. Operator token only. */
  senderIsOwner: z.boolean().optional(),
});

export const LABEL_MAX = 512;

/**
 * Closed and never empty: a misspelt field is a 400 naming it, and a body changing nothing is a 400, both
 * stated in /openapi.json (`additionalProperties: false`, `minProperties: 1`) as the server checks them.
 * A label is OpenClaw's (test/http/rest.test.ts): trimmed, 1..512 characters, so at most 512 with a non-blank.
 */
export const sessionPatch = z
  .strictObject({
    label: z
      .string()
      .max(LABEL_MAX, `invalid label: too long (max ${LABEL_MAX})`)
      .regex(/\S/, "invalid label: empty")
      .nullable()
      .optional(),
    model: z.union([z.string().max(512), z.null()]).optional(),
    thinkingLevel: z.union([z.string().max(32), z.null()]).optional(),
    verboseLevel: z.union([z.string().max(32), z.null()]).optional(),
    sendPolicy: z.unknown().optional(),
  })
  .refine(
    (patch) => Object.keys(patch).length > 0,
    "nothing to change (label, model, thinkingLevel, verboseLevel, sendPolicy)",
  )
  .meta({ minProperties: 1 });

export const listQuery = z.object({
  agentId: z
    .string()
    .max(128)
    .optional()
    .describe("Agent whose sessions to list (default: the token's agent, or the default agent)"),
  limit: intQuery({ min: 1, max: 1000, def: 50, description: "Rows per page" }),
  kinds: z.string().max(4096).optional().describe("Comma-separated kinds: main, group, cron, hook, node, other"),
  activeMinutes: intQuery({ min: 1, max: 10_000_000, description: "Only sessions updated within N minutes" }),
  cursor: z.string().max(4096).optional().describe("`nextCursor` of the previous page"),
});

export const historyQuery = z.object({
  limit: intQuery({ min: 1, max: 1000, description: "Messages (default 50)" }),
  before: intQuery({
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    description: "Only messages older than this seq (`nextBefore` of the previous page)",
  }),
  includeTools: z.string().optional().describe("`true` to include toolResult messages"),
});

/** Label rules of OpenClaw (test/http/rest.test.ts): trimmed, 1..512 characters. */
export function normalizeLabel(v: unknown): string {
  if (typeof v !== "string") throw invalid("invalid label: must be a string");
  const t = v.trim();
  if (!t) throw invalid("invalid label: empty");
  if (t.length > LABEL_MAX) throw invalid(`invalid label: too long (max ${LABEL_MAX})`);
  return t;
}

import { z } from "zod";
import { THINKING_LEVELS } from "../runners/thinking";
import { type attachmentsReceipt, MEDIA_TYPE } from "../spawn/attachments";

/**
 * The `sessions_spawn` parameters and its accepted result: the one schema the tool registry validates
 * with, /openapi.json documents and the typed client (src/client/index.ts) builds on.
 */

/** Longest accepted run timeout (docs/limits.md): finite, so a deadline is always a real time. */
export const RUN_TIMEOUT_SECONDS_MAX = 30 * 24 * 3600;

const attachmentSchema = z.object({
  name: z.string().max(255),
  content: z.string(),
  encoding: z.enum(["utf8", "base64"]).optional(),
  mimeType: z
    .string()
    .max(255)
    .trim()
    .regex(MEDIA_TYPE, "expected a media type such as text/plain or image/png")
    .optional()
    .describe("The file's media type (`type/subtype`, optional `; name=value` parameters); served back as a download."),
});

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts), never silently dropped.
export const sessionsSpawnSchema = z.strictObject({
  task: z
    .string()
    .describe(
      "What the sub-agent should do (required; at most limits.maxMessageBytes, 512 KiB by default; larger is a 413).",
    ),
  label: z.string().max(512).optional().describe("Short label for logs/UI."),
  agentId: z.string().max(256).optional().describe("Spawn under another agent id (see agents_list)."),
  model: z
    .string()
    .max(512)
    .optional()
    .describe("Model override for the sub-agent (<provider>/<model>); invalid values are an error."),
  thinking: z
    .string()
    .max(64)
    .optional()
    .describe(`Thinking level: ${THINKING_LEVELS.join(", ")}.`),
  runtime: z
    .enum(["subagent", "acp"])
    .optional()
    .describe('"subagent" (default). "acp" (external coding harnesses) is not supported here.'),
  lightContext: z
    .boolean()
    .optional()
    .describe(
      "Accepted for OpenClaw compatibility: sub-agents here get no bootstrap files, so their context is always light.",
    ),
  resumeSessionId: z.string().optional().describe('runtime="acp" only (not supported).'),
  cwd: z.string().optional().describe('runtime="acp" only (not supported).'),
  streamTo: z.literal("parent").optional().describe('runtime="acp" only (not supported).'),
  runTimeoutSeconds: z
    .number()
    .min(0)
    .max(RUN_TIMEOUT_SECONDS_MAX)
    .optional()
    .describe(
      "Seconds until the sub-agent's run is aborted (it then announces timed out). Omitted: agents.defaults.subagents.runTimeoutSeconds when set, otherwise 0. 0 = no timeout: the run is not cut by the general run deadline either.",
    ),
  timeoutSeconds: z
    .number()
    .min(0)
    .max(RUN_TIMEOUT_SECONDS_MAX)
    .optional()
    .describe("Legacy alias of runTimeoutSeconds."),
  thread: z
    .boolean()
    .optional()
    .describe("Bind the sub-agent to a thread of the requester's channel (channels.<ch>.threadBindings)."),
  mode: z
    .enum(["run", "session"])
    .optional()
    .describe('"run" (one-shot, default) or "session" (persistent, requires thread=true).'),
  cleanup: z
    .enum(["delete", "keep"])
    .optional()
    .describe('"keep" (archived later, default) or "delete" (removed after its announce).'),
  sandbox: z
    .enum(["inherit", "require"])
    .optional()
    .describe('"require" refuses unless the child runtime is sandboxed.'),
  attachments: z
    .array(attachmentSchema)
    .max(50)
    .optional()
    .describe("Inline files for the sub-agent (tools.sessions_spawn.attachments)."),
  attachAs: z
    .object({ mountPath: z.string().max(1024).optional() })
    .optional()
    .describe("Mount hint (reserved)."),
});
export type SessionsSpawnArgs = z.infer<typeof sessionsSpawnSchema>;

export interface SessionsSpawnAccepted {
  status: "accepted";
  childSessionKey: string;
  runId: string;
  mode: "run" | "session";
  note?: string;
  modelApplied?: boolean;
  attachments?: ReturnType<typeof attachmentsReceipt>;
  /** thread=true: the key whose inbound messages now run in the child (follow-ups continue in-thread). */
  threadKey?: string;
}

import { z } from "zod";
import { AGENT_ID_RE } from "../keys";
import { INDEX_SHARDS_DEFAULT, INDEX_SHARDS_MAX } from "../registry/shard-hash";
import { isAllowedRuntimeUrl, RUNTIME_URL_RULE } from "../runners/runtime-url";
import { CONTEXT_DEFAULT_BYTES, MESSAGE_MAX_BYTES } from "../session/byte-budget";
import { PROVIDER_APIS } from "./carry-over";

/**
 * The CONFIG document (docs/contract.md, "Configuration"). Key names and defaults follow OpenClaw (docs/openclaw-carry-over.md)
 * so an OpenClaw user can carry their config over. Unknown keys are tolerated (OpenClaw configs
 * carry many settings we do not use); known keys are validated strictly.
 */
const action = z.enum(["allow", "deny"]);

const sendPolicy = z.object({
  default: action.optional(),
  rules: z
    .array(
      z.object({
        action,
        // Strict: an unknown matcher dropped in silence would widen the rule (src/config/carry-over.ts maps legacy `provider`).
        match: z
          .strictObject({
            channel: z.string().optional(),
            chatType: z.enum(["direct", "group", "channel"]).optional(),
            keyPrefix: z.string().optional(),
            rawKeyPrefix: z.string().optional(),
          })
          .optional(),
      }),
    )
    .optional(),
});

/** A model reference: `<provider>/<model>`, or OpenClaw's `{primary, fallbacks?}` (fallbacks are reported unused). */
const modelRef = z.union([z.string(), z.object({ primary: z.string() }).transform((m) => m.primary)]);

const announceDelivery = z.enum(["direct", "requester"]);

const subagentDefaults = z.object({
  archiveAfterMinutes: z.number().min(0).default(60),
  runTimeoutSeconds: z.number().min(0).default(0),
  maxSpawnDepth: z.number().int().min(1).max(5).default(1),
  maxChildrenPerAgent: z.number().int().min(1).max(20).default(5),
  // Accepted for OpenClaw parity (docs/openclaw-carry-over.md); runs are already serialised per session object.
  maxConcurrent: z.number().int().min(1).default(8),
  allowAgents: z.array(z.string()).optional(),
  requireAgentId: z.boolean().default(false),
  model: modelRef.optional(),
  thinking: z.string().optional(),
  announceTimeoutMs: z.number().int().min(1).max(2_147_000_000).default(120_000),
  /** How a requester hears back from its children (docs/subagents.md). */
  announceDelivery: announceDelivery.default("direct"),
});

const agentSubagents = z.object({
  announceDelivery: announceDelivery.optional(),
  allowAgents: z.array(z.string()).optional(),
  requireAgentId: z.boolean().optional(),
  model: modelRef.optional(),
  thinking: z.string().optional(),
});

// The agent id grammar belongs to the session-key parser (src/keys.ts); CONFIG validates against the same rule.
export { AGENT_ID_RE };

const agentEntry = z.object({
  id: z
    .string()
    .transform((s) => s.trim().toLowerCase())
    .pipe(z.string().regex(AGENT_ID_RE, "agent id must match [a-z0-9][a-z0-9_-]{0,63}")),
  name: z.string().optional(),
  default: z.boolean().optional(),
  model: modelRef.optional(),
  thinking: z.string().optional(),
  sandbox: z.object({ mode: z.enum(["off", "all"]).default("off") }).optional(),
  subagents: agentSubagents.optional(),
  systemPrompt: z.string().optional(),
  /** This agent's index shards, instead of session.indexShards (docs/scale.md: a small agent 1, a hot one 64). */
  indexShards: z.number().int().min(1).max(INDEX_SHARDS_MAX).optional(),
  runtime: z
    .discriminatedUnion("type", [
      z.object({ type: z.literal("model") }),
      z.object({
        type: z.literal("webhook"),
        url: z.string().url().refine(isAllowedRuntimeUrl, RUNTIME_URL_RULE),
        secret: z.string().optional(),
      }),
    ])
    .optional(),
});

const providerModel = z.object({
  id: z.string(),
  cost: z.object({ input: z.number().min(0).optional(), output: z.number().min(0).optional() }).optional(),
  /** Tokens the model can take in; shown as a session's `contextTokens`. */
  contextWindow: z.number().int().min(1).optional(),
});

const provider = z
  .object({
    // Optional for the first-party APIs (their SDKs know the vendor's URL); required for openai-completions.
    baseUrl: z.string().url().optional(),
    apiKey: z.string().optional(),
    api: z.enum(PROVIDER_APIS).default("openai-completions"),
    models: z.array(providerModel).optional(),
  })
  .superRefine((p, ctx) => {
    if (p.api === "openai-completions" && !p.baseUrl)
      ctx.addIssue({ code: "custom", path: ["baseUrl"], message: "required for api openai-completions" });
  });

const channel = z.object({
  webhookUrl: z.string().url().optional(),
  webhookSecret: z.string().optional(),
  threadBindings: z.boolean().optional(),
});

const toolPolicy = z.object({
  allow: z.array(z.string()).optional(),
  alsoAllow: z.array(z.string()).optional(),
  deny: z.array(z.string()).optional(),
});

export const ConfigSchema = z.object({
  session: z
    .object({
      mainKey: z
        .string()
        .transform((s) => s.trim().toLowerCase() || "main")
        .default("main"),
      scope: z.enum(["per-sender", "global"]).default("per-sender"),
      // Accepted for OpenClaw parity (docs/openclaw-carry-over.md): channel gateways choose the DM key they post to.
      dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
      agentToAgent: z.object({ maxPingPongTurns: z.number().int().min(0).max(5).default(5) }).prefault({}),
      sendPolicy: sendPolicy.optional(),
      // Objects the session index of one agent is spread over (docs/scale.md: why 16, and why the
      // count is fixed for a deployment's life — rows are placed by a hash of the key modulo it).
      indexShards: z.number().int().min(1).max(INDEX_SHARDS_MAX).default(INDEX_SHARDS_DEFAULT),
    })
    .prefault({}),
  tools: z
    .object({
      sessions: z
        .object({
          // Invalid or missing visibility falls back to "tree" as in OpenClaw, case-insensitive (test/policy.test.ts).
          visibility: z.string().optional(),
        })
        .prefault({}),
      agentToAgent: z
        .object({ enabled: z.boolean().default(false), allow: z.array(z.string()).default([]) })
        .prefault({}),
      subagents: z.object({ tools: toolPolicy.optional() }).prefault({}),
      sessions_spawn: z
        .object({
          attachments: z
            .object({
              enabled: z.boolean().default(false),
              maxFiles: z.number().int().min(1).max(50).default(50),
              maxFileBytes: z.number().int().min(1).default(1_048_576),
              maxTotalBytes: z.number().int().min(1).default(5_242_880),
              retainOnSessionKeep: z.boolean().default(false),
            })
            .prefault({}),
        })
        .prefault({}),
    })
    .prefault({}),
  agents: z
    .object({
      defaults: z
        .object({
          model: modelRef.default("builtin/echo"),
          thinking: z.string().optional(),
          timeoutSeconds: z.number().int().min(1).default(600),
          sandbox: z
            .object({
              mode: z.enum(["off", "all"]).default("off"),
              sessionToolsVisibility: z.enum(["spawned", "all"]).default("spawned"),
            })
            .prefault({}),
          subagents: subagentDefaults.prefault({}),
        })
        .prefault({}),
      list: z.array(agentEntry).default([{ id: "main", name: "Main", default: true }]),
    })
    .prefault({}),
  models: z.object({ providers: z.record(z.string(), provider).default({}) }).prefault({}),
  channels: z.record(z.string(), channel).default({}),
  limits: z
    .object({
      /** Failed auth attempts per credential and per address per minute before 429, when the AUTH_FAILURES binding is absent (src/http/rate-limit.ts). */
      authFailuresPerMinute: z.number().int().min(1).default(10),
      /** Largest inbound message / spawn task, and largest generated text kept (docs/limits.md). Only lower than 512 KiB. */
      maxMessageBytes: z.number().int().min(1024).max(MESSAGE_MAX_BYTES).default(MESSAGE_MAX_BYTES),
      /** Byte budget of a run's model context: the newest messages that fit (docs/limits.md). */
      maxContextBytes: z
        .number()
        .int()
        .min(16 * 1024)
        .max(16 * 1024 * 1024)
        .default(CONTEXT_DEFAULT_BYTES),
    })
    .prefault({}),
});

export type Config = z.infer<typeof ConfigSchema>;
export type AgentConfig = Config["agents"]["list"][number];

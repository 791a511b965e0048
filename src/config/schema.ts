import { z } from "zod";
import { AGENT_ID_RE } from "../keys";
import { INDEX_SHARDS_MAX } from "../registry/shard-hash";
import { PROVIDER_APIS } from "../runners/provider-catalog";
import { CONTEXT_DEFAULT_BYTES, MESSAGE_MAX_BYTES } from "../session/byte-budget";
import { type AgentConfig, agentsSchema } from "./agents-schema";

/**
 * The CONFIG document (docs/contract.md, "Configuration"). Key names follow OpenClaw 2026
 * (docs/openclaw-carry-over.md has every key the gateway reads and what it does with it) so an OpenClaw
 * user can paste their config. Unknown keys are tolerated and reported (OpenClaw configs carry many
 * settings a session gateway does not use); known keys are validated strictly.
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

const providerModel = z.object({
  id: z.string(),
  name: z.string().optional(),
  cost: z.object({ input: z.number().min(0).optional(), output: z.number().min(0).optional() }).optional(),
  /** Tokens the model can take in; shown as a session's `contextTokens`, and the compaction budget. */
  contextWindow: z.number().int().min(1).optional(),
  /** OpenClaw's cap on active input tokens, when lower than the window (the compaction budget). */
  contextTokens: z.number().int().min(1).optional(),
});

/**
 * A provider block: an overlay on a built-in provider (any subset of keys: src/runners/provider-catalog.ts),
 * or a custom provider. Whether it can serve a model (a base URL, a key) is checked per agent when the
 * config loads (src/config/agent-checks.ts), so one broken provider is a warning, not a down gateway.
 */
const provider = z.object({
  baseUrl: z.string().optional(),
  /** A literal key, `${NAME}`, `$NAME`, `env:NAME`, or a known provider variable name (docs/models.md). */
  apiKey: z.string().optional(),
  api: z.enum(PROVIDER_APIS).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  models: z.array(providerModel).optional(),
});

/** A channel: Switchboard's outbound delivery target, and whether its threads can bind sub-agents. */
const channel = z.object({
  /** Where replies and announces of this channel are POSTed, signed with `secret` (docs/webhooks.md). */
  outbound: z.object({ url: z.url(), secret: z.string().optional() }).optional(),
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
      // Channel gateways choose the DM key they post to (src/policy/dm-scope.ts).
      dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
      agentToAgent: z.object({ maxPingPongTurns: z.number().int().min(0).max(5).default(5) }).prefault({}),
      sendPolicy: sendPolicy.optional(),
      // A fixed count of objects for every agent's session index (docs/scale.md: why it is fixed once rows
      // exist — rows are placed by a hash of the key modulo it). Unset: each index sizes itself (indexSplit).
      indexShards: z.number().int().min(1).max(INDEX_SHARDS_MAX).optional(),
      // The self-sizing index's thresholds (docs/scale.md, "The self-sizing index"; bounds in docs/limits.md).
      indexSplit: z
        .object({
          rows: z.number().int().min(1).max(5_000_000).default(250_000),
          writesPerSecond: z.number().int().min(1).max(10_000).default(150),
          sustainSeconds: z.number().int().min(0).max(3_600).default(60),
          coolSeconds: z.number().int().min(0).max(604_800).default(3_600),
          maxShards: z.number().int().min(1).max(INDEX_SHARDS_MAX).default(INDEX_SHARDS_MAX),
        })
        .prefault({}),
    })
    .prefault({}),
  tools: z
    .object({
      sessions: z
        .object({
          // Invalid or missing visibility falls back to "tree" as in OpenClaw, case-insensitive (test/policy/policy.test.ts).
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
  agents: agentsSchema,
  models: z
    .object({
      /** `replace`: only the providers configured here exist (no built-in catalogue). */
      mode: z.enum(["merge", "replace"]).default("merge"),
      providers: z.record(z.string(), provider).default({}),
    })
    .prefault({}),
  channels: z.record(z.string(), channel).default({}),
  /** OpenClaw's inline environment: read where the Worker's environment lacks a name (src/config/env-refs.ts). */
  env: z.object({ vars: z.record(z.string(), z.string()).optional() }).optional(),
  mcp: z
    .object({
      /** Host names of browser origins (`app.example.com`) that may call `/mcp`, besides loopback names (src/http/mcp-guard.ts). */
      allowedOrigins: z.array(z.string().min(1).max(253)).max(50).default([]),
      /** Host names `/mcp` answers under (and whose pages may call it); empty: any host, no page but loopback and allowedOrigins. */
      allowedHosts: z.array(z.string().min(1).max(253)).max(50).default([]),
    })
    .prefault({}),
  limits: z
    .object({
      /** Failed auth attempts per credential and per address per minute before 429, when the AUTH_FAILURES binding is absent (src/http/rate-limit.ts). */
      authFailuresPerMinute: z.number().int().min(1).default(10),
      /** Largest inbound message / spawn task, and largest generated text kept (docs/limits.md). Only lower than 512 KiB. */
      maxMessageBytes: z.number().int().min(1024).max(MESSAGE_MAX_BYTES).default(MESSAGE_MAX_BYTES),
      /** Byte budget of a run's model context: the summary and the newest messages that fit (docs/limits.md). */
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
export type { AgentConfig };
export type ProviderConfig = Config["models"]["providers"][string];

// The agent id grammar belongs to the session-key parser (src/keys.ts); CONFIG validates against the same rule.
export { AGENT_ID_RE };

import { routeOf } from "../channels/outbox";
import { agentUnavailable, areChildrenSandboxed, findAgent } from "../config/load";
import { AGENT_ID_RE, type Config } from "../config/schema";
import { fromRpcError, invalid } from "../errors";
import { parseCanonical } from "../keys";
import { log } from "../log";
import { checkModelRef } from "../runners/models";
import { INVALID_THINKING, parseThinkingLevel } from "../runners/thinking";
import { checkTextSize } from "../session/byte-budget";
import { callExtension } from "../session/extensions";
import type { SubagentInfo } from "../session/types";
import { attachmentsReceipt, validateAttachments } from "../spawn/attachments";
import type { SpawnChildRequest } from "../spawn/child-spawn";
import { getRequesterSpawnState, releaseChildSlot, reserveChildSlot } from "../spawn/requester-side";
import {
  ACCEPTED_NOTE_DIRECT,
  ACCEPTED_NOTE_DIRECT_INTERNAL,
  ACCEPTED_NOTE_RUN,
  ACCEPTED_NOTE_SESSION,
  subagentSystemPrompt,
  subagentTaskMessage,
} from "../spawn/subagent-prompt";
import { bindThread, threadKeyFor } from "../spawn/thread-binding";
import { recordSpawnTask } from "../tasks/task-client";
import { newTaskId } from "../tasks/task-id";
import { spawnAllowlist } from "./agents-list";
import { type Refusal, refusal, type ToolContext } from "./context";
import { defineTool } from "./definition";
import { type SessionsSpawnAccepted, type SessionsSpawnArgs, sessionsSpawnSchema } from "./sessions-spawn-schema";

/**
 * `sessions_spawn` (test/tools/sessions-spawn.test.ts, test/spawn/spawn-parameters.test.ts): checks in OpenClaw's order with its
 * texts, then one transaction in the child's object creates it and queues its task. Never blocks:
 * the result is `accepted` at once; completion is announced back to the requester by the child
 * (src/spawn/subagent-lifecycle.ts).
 */

/** Channel-delivery keys OpenClaw refuses with a pointer to the right tool. */
const CHANNEL_DELIVERY_KEYS = ["target", "transport", "channel", "to", "threadId", "replyTo"];
/** Parameters of OpenClaw's external-harness runtime (runtime="acp"), which Switchboard does not run. */
const ACP_ONLY_KEYS = ["resumeSessionId", "cwd", "streamTo"] as const;
const MOUNT_PATH_RE = /^[A-Za-z0-9._\-/:]+$/;

/** Model of the child: explicit → target agent's sub-agent model → target agent model → defaults (test/spawn/spawn-parameters.test.ts). */
function resolveChildModel(cfg: Config, targetAgentId: string, explicit?: string): string {
  const agent = findAgent(cfg, targetAgentId);
  return (
    explicit ??
    agent?.subagents?.model ??
    agent?.model ??
    cfg.agents.defaults.subagents.model ??
    cfg.agents.defaults.model!
  );
}

function resolveChildThinking(cfg: Config, targetAgentId: string, explicit?: string): string | undefined {
  return explicit ?? findAgent(cfg, targetAgentId)?.subagents?.thinking ?? cfg.agents.defaults.subagents.thinking;
}

export async function sessionsSpawn(
  ctx: ToolContext,
  args: SessionsSpawnArgs,
): Promise<SessionsSpawnAccepted | Refusal> {
  const { cfg, caller, env } = ctx;
  const sub = cfg.agents.defaults.subagents;
  checkTextSize("task", args.task, cfg.limits.maxMessageBytes);

  // 0. runtime: only sub-agents run here; ACP parameters are refused with OpenClaw's texts.
  if (args.runtime === "acp") {
    return refusal(
      "error",
      'runtime="acp" is not supported by Switchboard: sub-agents run with runtime="subagent" (omit runtime). Use agents_list to find agents to spawn.',
    );
  }
  for (const key of ACP_ONLY_KEYS) {
    if (args[key] !== undefined)
      return refusal("error", `${key} is only supported for runtime=acp; got runtime=subagent`);
  }

  // 1. agentId syntax (before any object is touched).
  const rawAgentId = args.agentId;
  const targetAgentId = rawAgentId !== undefined ? rawAgentId.toLowerCase() : caller.agentId;
  if (rawAgentId !== undefined && !AGENT_ID_RE.test(targetAgentId)) {
    return refusal(
      "error",
      `Invalid agentId "${rawAgentId}". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.`,
    );
  }

  // 2. mode / thread.
  const thread = args.thread === true;
  const mode = args.mode ?? (thread ? "session" : "run");
  if (mode === "session" && !thread) {
    return refusal("error", 'mode="session" requires thread=true so the subagent can stay bound to a thread.');
  }
  const cleanup = mode === "session" ? "keep" : (args.cleanup ?? "keep");

  // 3. depth, from the requester's stored spawnDepth (a flat key cannot claim a lower depth).
  const state = await getRequesterSpawnState(env, caller.sessionKey);
  const requesterMeta = state.meta;
  const callerDepth = requesterMeta?.spawnDepth ?? (caller.isSubagent ? 1 : 0);
  const maxDepth = sub.maxSpawnDepth;
  if (callerDepth >= maxDepth) {
    return refusal(
      "forbidden",
      `sessions_spawn is not allowed at this depth (current depth: ${callerDepth}, max: ${maxDepth})`,
    );
  }

  // 4. active children of this requester session (re-checked atomically when the slot is reserved).
  const maxChildren = sub.maxChildrenPerAgent;
  if (state.activeChildren >= maxChildren) return childrenRefusal(state.activeChildren, maxChildren);

  // 5. requireAgentId.
  const requesterAgent = findAgent(cfg, caller.agentId);
  const requireAgentId = requesterAgent?.subagents?.requireAgentId ?? sub.requireAgentId;
  if (requireAgentId && rawAgentId === undefined) {
    return refusal(
      "forbidden",
      "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids.",
    );
  }

  // 6. allowlist for cross-agent targets (same-agent spawns are always allowed).
  if (targetAgentId !== caller.agentId) {
    const allow = spawnAllowlist(cfg, caller.agentId);
    if (!allow.allowAny && !allow.ids.includes(targetAgentId)) {
      return refusal(
        "forbidden",
        `agentId is not allowed for sessions_spawn (allowed: ${allow.ids.length ? allow.ids.join(", ") : "none"})`,
      );
    }
  }

  // 7. the child's key.
  const childKey = `agent:${targetAgentId}:subagent:${crypto.randomUUID()}`;

  // A target agent whose runtime cannot run here (OpenClaw's ACP harnesses) gets no child and no slot.
  const unavailable = agentUnavailable(cfg, targetAgentId);
  if (unavailable) return refusal("error", unavailable);

  // 8. sandbox inheritance and sandbox="require".
  const childSandboxed = areChildrenSandboxed(cfg, targetAgentId);
  if (!childSandboxed && caller.sandboxed) {
    return refusal(
      "forbidden",
      "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.",
    );
  }
  if (!childSandboxed && args.sandbox === "require") {
    return refusal(
      "forbidden",
      'sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".',
    );
  }

  // 9. thinking level.
  const explicitThinking = parseThinkingLevel(args.thinking);
  if (args.thinking !== undefined && !explicitThinking) return refusal("error", INVALID_THINKING(args.thinking));
  const thinking = parseThinkingLevel(resolveChildThinking(cfg, targetAgentId, explicitThinking));

  // 10. model: an invalid model is an error and no run starts — never a silently ignored override.
  const model = resolveChildModel(cfg, targetAgentId, args.model);
  const modelProblem = checkModelRef(cfg, env, model, { agentId: targetAgentId });
  if (modelProblem) return refusal("error", modelProblem, { childSessionKey: childKey });

  // 11. thread binding needs a channel that supports it.
  const route = routeOf(requesterMeta);
  const requesterChannel = requesterMeta?.lastChannel ?? requesterMeta?.channel;
  if (thread) {
    if (!requesterChannel) {
      return refusal("error", "thread=true is unavailable because this session has no channel to bind a thread in.", {
        childSessionKey: childKey,
      });
    }
    if (cfg.channels[requesterChannel]?.threadBindings !== true) {
      return refusal(
        "error",
        `thread=true is unavailable because channel "${requesterChannel}" does not support thread bindings (set channels.${requesterChannel}.threadBindings: true).`,
        { childSessionKey: childKey },
      );
    }
  }

  // 12. attachments (validated and hashed here; stored by the child in its spawn transaction).
  const validated = await validateAttachments(args.attachments ?? [], cfg.tools.sessions_spawn.attachments);
  if (!validated.ok) return refusal(validated.status, validated.error);
  // Like transcriptPath, a gateway path (OpenClaw's workspace dir does not exist here): GET <relDir>/<name>.
  const relDir = `/v1/sessions/${encodeURIComponent(childKey)}/attachments`;
  const receipt = validated.files.length > 0 ? attachmentsReceipt(validated.files, relDir) : undefined;
  const mountPath = args.attachAs?.mountPath?.trim();

  // Reserve the slot atomically in the requester (two concurrent spawns cannot both take the last one).
  // The label (else the task) names the child in its parent's "Child completion results".
  const slot = await reserveChildSlot(
    env,
    caller.sessionKey,
    childKey,
    maxChildren,
    (args.label?.trim() || args.task).slice(0, 200),
  );
  if (!slot.ok) return childrenRefusal(slot.activeChildren, maxChildren);

  const childDepth = callerDepth + 1;
  const taskId = newTaskId(caller.sessionKey);
  const binding = thread ? threadKeyFor(caller.sessionKey, childKey) : null;
  // The requester's agent decides how it hears back from its children.
  const announceDelivery = findAgent(cfg, caller.agentId)?.subagents?.announceDelivery ?? sub.announceDelivery;
  const runTimeoutSeconds = Math.max(
    0,
    Math.floor(args.runTimeoutSeconds ?? args.timeoutSeconds ?? sub.runTimeoutSeconds ?? 0),
  );
  const subagent: SubagentInfo = {
    requesterKey: caller.sessionKey,
    ...(requesterChannel ? { requesterChannel } : {}),
    ...(route ? { requesterRoute: route } : {}),
    task: args.task,
    ...(args.label ? { label: args.label } : {}),
    mode,
    cleanup,
    ...(runTimeoutSeconds > 0 ? { runTimeoutSeconds } : {}),
    ...(announceDelivery === "requester" ? { announceDelivery } : {}),
    status: "running",
    startedAt: Date.now(),
    ...(binding ? { thread: binding } : {}),
    // The task run starts once the sub-agent lane grants it a slot (maxConcurrent).
    lane: "waiting",
    // Its task in this requester's ledger (docs/tasks.md): the id routes to the requester's object.
    taskId,
  };
  const request: SpawnChildRequest = {
    init: {
      spawnedBy: caller.sessionKey,
      spawnDepth: childDepth,
      modelOverride: model,
      ...(thinking ? { thinkingLevel: thinking } : {}),
      ...(args.label ? { label: args.label } : {}),
      subagent,
    },
    input: {
      kind: "subagent_task",
      message: subagentTaskMessage({ task: args.task, depth: childDepth, maxDepth, mode }),
      provenance: {
        kind: "inter_session",
        sourceSessionKey: caller.sessionKey,
        ...(requesterChannel ? { sourceChannel: requesterChannel } : {}),
        sourceTool: "sessions_spawn",
      },
      extraSystemPrompt: subagentSystemPrompt({
        depth: childDepth,
        maxDepth,
        label: args.label,
        requesterKey: caller.sessionKey,
        requesterChannel,
        childKey,
        attachments: receipt
          ? {
              count: receipt.count,
              totalBytes: receipt.totalBytes,
              relDir,
              ...(mountPath && MOUNT_PATH_RE.test(mountPath) ? { mountPath } : {}),
            }
          : undefined,
      }),
      deliver: false,
      ...(runTimeoutSeconds > 0 ? { timeoutSeconds: runTimeoutSeconds } : {}),
    },
    attachments: validated.files.map((f) => ({
      name: f.name,
      bytes: f.bytes,
      sha256: f.sha256,
      data: f.data,
      ...(f.mimeType ? { mimeType: f.mimeType } : {}),
    })),
  };

  let runId: string;
  try {
    runId = (await env.SESSIONS.getByName(childKey).spawnChild(request)).runId;
  } catch (err) {
    // Nothing was created (the child's transaction is all or nothing): give the slot back.
    await releaseChildSlot(env, caller.sessionKey, childKey).catch(() => undefined);
    const e = fromRpcError(err);
    return refusal("error", e instanceof Error ? e.message : String(e), { childSessionKey: childKey });
  }
  // The task, `queued` until the lane grants the child its slot. Best effort: the child's reports record it
  // too (src/tasks/task-report.ts), so a lost call only delays the row until the child's first report.
  await recordSpawnTask(env, caller.sessionKey, {
    runtime: "subagent",
    taskId,
    task: args.task,
    ...(args.label ? { label: args.label } : {}),
    childSessionKey: childKey,
    agentId: targetAgentId,
    runId,
    model,
  }).catch((err) => log.warn("task_record_failed", { sessionKey: caller.sessionKey, taskId, error: err }));
  // Ask the sub-agent lane now, so a child with a free slot starts before this call returns. Best effort:
  // the child's own timer asks again if this call is lost (src/spawn/subagent-lane-client.ts).
  await callExtension(env.SESSIONS.getByName(childKey), "subagent-lane", "ask").catch((err) =>
    log.warn("subagent_lane_ask_failed", { sessionKey: childKey, error: err, next: "the child's timer retries" }),
  );

  let bindFailure: string | null = null;
  if (binding) {
    // After the spawn: a binding must never point at a child that does not exist (a forwarded message
    // would create an empty session there). The child is already running, so a failed bind does not
    // undo the spawn: the result says so, and follow-ups can still go to the child's own key.
    try {
      await bindThread(env, {
        childKey,
        threadKey: binding.threadKey,
        route: {
          channel: requesterChannel!,
          to: route?.to ?? null,
          accountId: route?.accountId ?? null,
          threadId: binding.threadId,
        },
      });
    } catch (err) {
      const e = fromRpcError(err);
      bindFailure = e instanceof Error ? e.message : String(e);
      log.error("thread_bind_failed", { sessionKey: childKey, error: bindFailure });
    }
  }

  const isCronRequester = parseCanonical(caller.sessionKey, cfg).kind === "cron";
  const runNote =
    announceDelivery === "requester"
      ? ACCEPTED_NOTE_RUN
      : callerDepth > 0
        ? ACCEPTED_NOTE_DIRECT_INTERNAL
        : ACCEPTED_NOTE_DIRECT;
  const baseNote = mode === "session" ? ACCEPTED_NOTE_SESSION : isCronRequester ? undefined : runNote;
  const note = bindFailure
    ? `${baseNote} Thread binding failed (${bindFailure}); send follow-ups to childSessionKey instead.`
    : baseNote;
  return {
    status: "accepted",
    childSessionKey: childKey,
    runId,
    mode,
    ...(note ? { note } : {}),
    // The built-in runner runs the child on this model; a webhook runtime receives it as `model` and decides.
    modelApplied: findAgent(cfg, targetAgentId)?.runtime?.type !== "webhook",
    ...(receipt ? { attachments: receipt } : {}),
    ...(binding && !bindFailure ? { threadKey: binding.threadKey } : {}),
  };
}

function childrenRefusal(active: number, max: number): Refusal {
  return refusal("forbidden", `sessions_spawn has reached max active children for this session (${active}/${max})`);
}

export const sessionsSpawnTool = defineTool({
  name: "sessions_spawn",
  description:
    'Spawn a sub-agent in an isolated session (agent:<agentId>:subagent:<uuid>) to work on a task. Returns {status:"accepted", runId, childSessionKey} immediately; the result is announced back to this session when the sub-agent finishes (do not poll). Use agents_list to see which agent ids you may target.',
  schema: sessionsSpawnSchema,
  handler: sessionsSpawn,
  subagents: "orchestrators",
  task: true,
  rejectArgs: (args: Record<string, unknown>) => {
    for (const key of CHANNEL_DELIVERY_KEYS) {
      if (args[key] !== undefined)
        throw invalid(
          `sessions_spawn does not support "${key}". Use "message" or "sessions_send" for channel delivery.`,
        );
    }
  },
});

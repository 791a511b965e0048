import { z } from "zod";
import { BLOCKED_BY_POLICY } from "../channels/outbox";
import { fromRpcError } from "../errors";
import { idempotencyScope } from "../http/principal";
import { deriveChannel, displayKey, type ParsedKey, parseCanonical } from "../keys";
import { isAgentToAgentAllowed, visibilityError } from "../policy/visibility";
import { sessionIndex } from "../registry/session-index";
import { type A2aStart, announceRouteOf, messageContextPrompt } from "../send/a2a-flow";
import { checkTextSize } from "../session/byte-budget";
import { callExtension } from "../session/extensions";
import { MAX_WAIT_MS } from "../session/run-types";
import type { SendIntoResult } from "../session/send-into-rpc";
import type { RunSnapshot, SessionMeta } from "../session/types";
import type { SendTaskRef } from "../tasks/send-task";
import { newTaskId } from "../tasks/task-id";
import { isRefusal, type Refusal, refusal, type ToolContext, timed } from "./context";
import { defineTool } from "./definition";
import { callerVisibility, guardTarget, parseTargetKey, resolveSessionReference } from "./resolve";
import {
  checkModeMessage,
  followupResult,
  type ModeDelivery,
  type ModeResult,
  prepareSendArgs,
  sendModeSchema,
  sendWithoutTurn,
} from "./sessions-send-modes";
import { watchAfterAdmission, watchSchema, withWatched } from "./sessions-send-watch";

/** Default wait of a send, OpenClaw's (test/tools/sessions-send.test.ts). */
export const SEND_DEFAULT_TIMEOUT_SECONDS = 30;
/** Longest accepted `timeoutSeconds` (a 400 beyond); a wait itself is clamped to 15 min (MAX_WAIT_MS) and over MCP to 50 s. */
export const SEND_TIMEOUT_SECONDS_MAX = 86_400;

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts), never silently ignored (OpenClaw's
// `mode` and `watch` would otherwise be dropped and the send behave differently from what was asked).
export const sessionsSendSchema = z.strictObject({
  sessionKey: z
    .string()
    .max(512)
    .optional()
    .describe("Target session key, `main`, `current`, or a sessionId from sessions_list."),
  label: z.string().max(512).optional().describe("Target a session by its label instead of its key (not both)."),
  agentId: z.string().max(64).optional().describe("Agent whose sessions the `label` lookup searches (default: yours)."),
  message: z
    .string()
    .describe("The message to send (at most limits.maxMessageBytes, 512 KiB by default; larger is a 413)."),
  timeoutSeconds: z
    .number()
    .min(0)
    .max(SEND_TIMEOUT_SECONDS_MAX)
    .optional()
    .describe(
      `Seconds to wait for the target's reply (default ${SEND_DEFAULT_TIMEOUT_SECONDS}, at most ${SEND_TIMEOUT_SECONDS_MAX}; a wait ends after 900 s with status "timeout" while the run continues); 0 = fire-and-forget.`,
    ),
  idempotencyKey: z
    .string()
    .max(256)
    .optional()
    .describe("Retry-safe key: the same key returns the same run, never a second message."),
  mode: sendModeSchema,
  watch: watchSchema,
});
export type SessionsSendArgs = z.infer<typeof sessionsSendSchema>;

/**
 * What happens to the target's announce: `pending` — the announce step runs and a reply other than
 * ANNOUNCE_SKIP is posted to the target's channel; `none` — the target has no route, or its channel no
 * webhook, so nothing will be posted (the step's reply stays in the target's transcript).
 */
export type SendDelivery = { status: "pending" | "none"; mode: "announce" };

export type SessionsSendResult =
  | { runId: string; status: "accepted"; sessionKey: string; delivery: SendDelivery }
  | { runId: string; status: "ok"; reply?: string; sessionKey: string; delivery: SendDelivery }
  | { runId: string; status: "timeout" | "error"; error: string; sessionKey: string }
  | ModeResult
  | Refusal;

/** Refusals carry a fresh random runId (no run was started), as in OpenClaw (test/tools/sessions-send.test.ts). */
function refuse(status: Refusal["status"], error: string, extra: Record<string, unknown> = {}): Refusal {
  return refusal(status, error, { runId: crypto.randomUUID(), ...extra });
}

/** Label path of OpenClaw (test/tools/sessions-send.test.ts): agent scope checks first, then one indexed lookup. */
async function resolveByLabel(
  ctx: ToolContext,
  label: string,
  agentIdArg: string | undefined,
  restrictToSpawned: boolean,
): Promise<ParsedKey | Refusal> {
  const agentId = (agentIdArg ?? ctx.caller.agentId).trim().toLowerCase();
  if (restrictToSpawned && agentId !== ctx.caller.agentId)
    return refuse("forbidden", "Sandboxed sessions_send label lookup is limited to this agent");
  if (agentId !== ctx.caller.agentId) {
    const a2a = ctx.cfg.tools.agentToAgent;
    if (a2a.enabled !== true) return refuse("forbidden", visibilityError("send", "a2aDisabled"));
    if (!isAgentToAgentAllowed(a2a, ctx.caller.agentId, agentId))
      return refuse("forbidden", visibilityError("send", "a2aDenied"));
  }
  const keys = ctx.cfg.agents.roster.some((a) => a.id === agentId)
    ? await sessionIndex(ctx.env, ctx.cfg, agentId).resolveLabel(
        label,
        restrictToSpawned ? ctx.caller.sessionKey : undefined,
      )
    : [];
  if (keys.length === 0) {
    if (restrictToSpawned) return refuse("forbidden", "Session not visible from this sandboxed agent session.");
    return refuse("error", `No session found with label: ${label}`);
  }
  if (keys.length > 1) return refuse("error", `Multiple sessions found with label: ${label} (${keys.join(", ")})`);
  return parseTargetKey(ctx, keys[0]);
}

function maybeMeta(env: Env, key: string): Promise<SessionMeta | null> {
  return env.SESSIONS.getByName(key).getMeta();
}

/** The tool-visible outcome of a waited run (test/tools/sessions-send.test.ts): the reply is that run's own, never an older one. */
function waitedResult(
  run: RunSnapshot,
  sessionKey: string,
  timeoutSeconds: number,
  delivery: SendDelivery,
): SessionsSendResult {
  switch (run.status) {
    case "ok":
      return { runId: run.runId, status: "ok", ...(run.reply ? { reply: run.reply } : {}), sessionKey, delivery };
    case "error":
      return { runId: run.runId, status: "error", error: run.error || "agent error", sessionKey };
    case "lost":
      return {
        runId: run.runId,
        status: "error",
        error: `Run lost: ${run.error || "its executor is gone"}`,
        sessionKey,
      };
    case "timeout":
    case "aborted":
      return { runId: run.runId, status: "timeout", error: run.error || "Run aborted", sessionKey };
    default:
      return {
        runId: run.runId,
        status: "timeout",
        error: `No reply within ${timeoutSeconds}s; the run continues. Read it later with sessions_history or GET /v1/runs/${run.runId}/wait.`,
        sessionKey,
      };
  }
}

export async function sessionsSend(ctx: ToolContext, args: SessionsSendArgs): Promise<SessionsSendResult> {
  checkTextSize("message", args.message, ctx.cfg.limits.maxMessageBytes);
  checkModeMessage(args.mode, args.message);
  if (args.sessionKey && args.label) return refuse("error", "Provide either sessionKey or label (not both).");
  const vis = callerVisibility(ctx);

  let target: ParsedKey;
  const rawTarget = args.sessionKey ?? args.label ?? "";
  if (args.label) {
    const byLabel = await resolveByLabel(ctx, args.label, args.agentId, vis.restrictToSpawned);
    if (isRefusal(byLabel)) return byLabel;
    target = byLabel;
  } else if (args.sessionKey) {
    const ref = await timed(
      ctx,
      "resolve",
      resolveSessionReference(ctx, args.sessionKey, { restrictToSpawned: vis.restrictToSpawned }),
    );
    if (isRefusal(ref))
      return {
        ...ref,
        runId: crypto.randomUUID(),
        ...(ref.status === "forbidden" ? { sessionKey: args.sessionKey } : {}),
      };
    target = ref.parsed;
  } else {
    return refuse("error", "Either sessionKey or label is required");
  }
  const targetKey = target.canonicalKey;
  const shownKey = displayKey(targetKey);
  const requesterKey = ctx.caller.sessionKey;

  // The visibility check runs before anything of the target is read: a send it refuses whatever the
  // target's lineage (the one fact it takes from the target) reads nothing of the target.
  const asParent = guardTarget(ctx, "send", target, requesterKey, vis, rawTarget);
  if (asParent)
    return {
      ...(guardTarget(ctx, "send", target, null, vis, rawTarget) ?? asParent),
      runId: crypto.randomUUID(),
      sessionKey: shownKey,
    };

  // The target's lineage and send policy are checked inside the target, in the call that queues the run
  // (src/session/send-into-rpc.ts): one round trip into the target. With a visibility that admits only the
  // target's parent, the refusal is the one a non-child target gets.
  const asNonChild = guardTarget(ctx, "send", target, null, vis, rawTarget);

  // The requester's channel (the run's context prompt and provenance); a send into its own session reads it
  // from the target, which is the requester.
  const requesterMeta = await timed(ctx, "requester", maybeMeta(ctx.env, requesterKey));
  const requesterParsed = parseCanonical(requesterKey, ctx.cfg);
  const channel = deriveChannel(requesterParsed, requesterMeta ?? {});
  const requesterChannel = channel === "unknown" ? undefined : channel;
  const a2a: A2aStart = {
    requesterKey,
    requesterExisted: requesterKey !== targetKey && requesterMeta !== null,
    requesterChannel,
    targetDisplayKey: shownKey,
    maxTurns: ctx.cfg.session.agentToAgent.maxPingPongTurns,
  };

  // Scoped to the requester and to the principal acting as it, so two callers choosing the same key never collide.
  const idempotencyKey = args.idempotencyKey
    ? `send:${idempotencyScope(ctx.caller)}:${requesterKey}:${args.idempotencyKey}`
    : undefined;
  if (args.mode === "steer" || args.mode === "notify") {
    const r = await sendWithoutTurn(ctx, args.mode, args.message, {
      targetKey,
      shownKey,
      provenance: {
        kind: "inter_session",
        sourceSessionKey: requesterKey,
        sourceChannel: requesterChannel,
        sourceTool: "sessions_send",
      },
      asNonChild,
      requesterKey,
      ...(idempotencyKey ? { idempotencyKey } : {}),
    });
    return isRefusal(r) ? r : withWatched(r, await watchAfterAdmission(ctx, args.watch, targetKey, !!requesterMeta));
  }

  const timeoutSeconds = Math.max(0, Math.floor(args.timeoutSeconds ?? SEND_DEFAULT_TIMEOUT_SECONDS));
  // A send outliving its wait is a task of the requester's ledger (src/tasks/send-task.ts): the wait as made below.
  const sendTask: SendTaskRef = {
    taskId: newTaskId(requesterKey),
    waitMs: Math.min(timeoutSeconds * 1000, MAX_WAIT_MS),
  };
  let sent: SendIntoResult;
  try {
    sent = await timed(
      ctx,
      "enqueue",
      callExtension(ctx.env.SESSIONS.getByName(targetKey), "send-into", "enqueue", {
        req: {
          input: {
            kind: "send",
            message: args.message,
            provenance: {
              kind: "inter_session",
              sourceSessionKey: requesterKey,
              sourceChannel: requesterChannel,
              sourceTool: "sessions_send",
            },
            extraSystemPrompt: messageContextPrompt(a2a),
            flowId: crypto.randomUUID(),
            data: { a2a, sendTask },
          },
          idempotencyKey,
        },
        ...(asNonChild ? { requireChildOf: requesterKey } : {}),
      }),
    );
  } catch (err) {
    const e = fromRpcError(err);
    return refuse("error", e instanceof Error ? e.message : String(e), { sessionKey: shownKey });
  }
  if ("refused" in sent) {
    if (sent.refused === "policy") return refuse("error", BLOCKED_BY_POLICY, { sessionKey: shownKey });
    return { ...(asNonChild as Refusal), runId: crypto.randomUUID(), sessionKey: shownKey };
  }
  const { run, meta: targetMeta } = sent;
  const watched = await watchAfterAdmission(ctx, args.watch, targetKey, !!requesterMeta);

  const route = announceRouteOf(targetMeta, target);
  const delivery: SendDelivery = {
    status: route && ctx.cfg.channels[route.channel.toLowerCase()]?.outbound ? "pending" : "none",
    mode: "announce",
  };
  // A followup answers in OpenClaw 2026's words: an announce that will not be posted is `skipped`.
  const followup = args.mode === "followup";
  const modeDelivery: ModeDelivery = {
    status: delivery.status === "pending" ? "pending" : "skipped",
    mode: "announce",
  };
  if (timeoutSeconds === 0) {
    if (followup) return withWatched(followupResult(run, shownKey, modeDelivery), watched);
    return withWatched({ runId: run.runId, status: "accepted", sessionKey: shownKey, delivery }, watched);
  }
  // Server-side wait in the target's object; the flow does not depend on it (a timeout cancels nothing).
  const waited = (await ctx.env.SESSIONS.getByName(targetKey).waitRun(run.runId, timeoutSeconds * 1000)) ?? run;
  if (followup) return withWatched(followupResult(waited, shownKey, modeDelivery), watched);
  return withWatched(waitedResult(waited, shownKey, timeoutSeconds, delivery), watched);
}

export const sessionsSendTool = defineTool({
  name: "sessions_send",
  description:
    "Send a message into another visible session by sessionKey or label. Use this to delegate follow-up work to an existing session; waits for the target run and returns the updated assistant reply when available. mode=steer guides the target's running run at its next step, mode=notify leaves context for its next turn without starting one, mode=followup always queues a new turn.",
  schema: sessionsSendSchema,
  handler: sessionsSend,
  subagents: "none",
  wait: { argument: "timeoutSeconds", defaultSeconds: SEND_DEFAULT_TIMEOUT_SECONDS },
  task: true,
  rejectArgs: prepareSendArgs,
});

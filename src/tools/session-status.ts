import { z } from "zod";
import { agentModel } from "../config/load";
import { fromRpcError, invalid } from "../errors";
import type { StateChanges } from "../events/state-log";
import { displayKey, looksLikeSessionKey, type ParsedKey } from "../keys";
import { canonicalModelRef, splitModelRef } from "../runners/model-resolution";
import { checkModelRef } from "../runners/models";
import type { DeliveryContext } from "../session/delivery-context";
import { callExtension } from "../session/extensions";
import type { StatusAnswer, StatusFacts } from "../session/status-rpc";
import { isRefusal, type Refusal, refusal, type ToolContext } from "./context";
import { defineTool } from "./definition";
import { callerVisibility, guardTarget, parseTargetKey, resolveSessionReference } from "./resolve";
import { statusCard } from "./status-card";

/** Longest `model` reference accepted (docs/limits.md). */
export const STATUS_MODEL_MAX_CHARS = 256;
const CHANGES_SINCE_TEXT = "changesSince must be a non-negative integer";

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts), never silently ignored.
export const sessionStatusSchema = z.strictObject({
  sessionKey: z
    .string()
    .max(1024)
    .optional()
    .describe("Session key, `current` (default: your own session), `main`, or a sessionId from sessions_list."),
  model: z
    .string()
    .max(STATUS_MODEL_MAX_CHARS)
    .optional()
    .describe(
      'Set this session\'s model override (an alias or <provider>/<model>); "default" or an empty string clears it. The next run uses it.',
    ),
  changesSince: z
    .number()
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .optional()
    .describe(
      "Also list the session's state changes after this version (a stateVersion of an earlier call), oldest first, at most 200.",
    ),
});
export type SessionStatusArgs = z.infer<typeof sessionStatusSchema>;

export interface SessionStatusResult {
  ok: true;
  sessionKey: string;
  agentId: string;
  /** The incarnation the versions belong to: a session created again under the key starts over (docs/events.md). */
  sessionId: string;
  changedModel: boolean;
  stateVersion: number;
  statusText: string;
  stateChanges?: StateChanges;
  model?: string;
  modelProvider?: string;
  modelOverride?: string | null;
  /** The persisted delivery route, when the session has one. */
  deliveryContext?: DeliveryContext;
  /** The running run's own route, only while it runs. */
  active?: DeliveryContext;
}

/** Every failure of this tool is one envelope (docs/contract.md, "session_status"): `{status: "error", tool, error}`. */
const fail = (error: string, extra: Record<string, unknown> = {}): Refusal =>
  refusal("error", error, { tool: "session_status", ...extra });

export async function sessionStatus(ctx: ToolContext, args: SessionStatusArgs): Promise<SessionStatusResult | Refusal> {
  // Without `sessionKey`: the caller's own session, named by its key in any error.
  const raw = args.sessionKey ?? displayKey(ctx.caller.sessionKey);
  const vis = callerVisibility(ctx);
  const target = await targetOf(ctx, raw, vis.restrictToSpawned);
  if (isRefusal(target)) return target;

  // Visibility first, before anything of the target is read or changed (as sessions_history does).
  const asParent = guardTarget(ctx, "status", target, ctx.caller.sessionKey, vis, raw);
  const asStranger = guardTarget(ctx, "status", target, null, vis, raw);
  if (asParent) return fail((asStranger ?? asParent).error);

  let setModel: string | null | undefined;
  if (args.model !== undefined) {
    const wanted = args.model.trim();
    if (wanted === "" || wanted.toLowerCase() === "default") setModel = null;
    else {
      const problem = checkModelRef(ctx.cfg, ctx.env, wanted, { agentId: target.agentId });
      if (problem) return fail(`Unrecognized model "${args.model}".`, { reason: problem });
      setModel = wanted;
    }
  }

  const answer: StatusAnswer = await callExtension(ctx.env.SESSIONS.getByName(target.canonicalKey), "status", "read", {
    ...(args.changesSince !== undefined ? { changesSince: args.changesSince } : {}),
    ...(setModel !== undefined ? { setModel } : {}),
    ...(asStranger ? { onlyIfSpawnedBy: ctx.caller.sessionKey } : {}),
  }).catch((err: unknown) => {
    // An error the object threw on purpose (a session being deleted: 409) keeps its type and text.
    throw fromRpcError(err);
  });
  if ("denied" in answer) return fail(asStranger!.error);
  if ("missing" in answer) return fail(`Unknown sessionKey: ${raw}`);

  const override = answer.modelOverride;
  const ref = effectiveModel(ctx, answer.agentId, override);
  const card = statusCard(
    ctx.cfg,
    answer,
    { ref, source: override ? "session override" : "agent default" },
    Date.now(),
  );
  // OpenClaw's text: the card, then (when present) the route and the state changes, each a fenced JSON block.
  const statusText = [
    card,
    ...(answer.deliveryContext || answer.active ? [jsonBlock("Route context", routeContext(answer))] : []),
    ...(answer.stateChanges ? [jsonBlock("Session state changes", answer.stateChanges)] : []),
  ].join("\n\n");
  const parts = splitModelRef(ref);
  return {
    ok: true,
    sessionKey: displayKey(answer.key),
    agentId: answer.agentId,
    sessionId: answer.sessionId,
    changedModel: answer.changedModel,
    stateVersion: answer.stateVersion,
    statusText,
    ...(answer.stateChanges ? { stateChanges: answer.stateChanges } : {}),
    ...routeContext(answer),
    // Only when `model` was passed: what the session now runs on, and its override (null once cleared).
    ...(args.model !== undefined
      ? {
          model: parts?.modelId ?? ref,
          ...(parts ? { modelProvider: parts.provider } : {}),
          modelOverride: override ?? null,
        }
      : {}),
  };
}

/** The session's persisted route and its running run's, as both `details` and the text's route block show them. */
function routeContext(a: StatusFacts): Pick<SessionStatusResult, "deliveryContext" | "active"> {
  return {
    ...(a.deliveryContext ? { deliveryContext: a.deliveryContext } : {}),
    ...(a.active ? { active: a.active } : {}),
  };
}

function jsonBlock(title: string, value: unknown): string {
  return `${title}:\n\`\`\`json\n${JSON.stringify(value, null, 2)}\n\`\`\``;
}

/** The `sessionKey` reference as a key, or the spec's error: a key that does not parse, an unknown sessionId. */
async function targetOf(ctx: ToolContext, raw: string, restrictToSpawned: boolean): Promise<ParsedKey | Refusal> {
  if (looksLikeSessionKey(raw)) {
    try {
      return parseTargetKey(ctx, raw);
    } catch {
      return fail(`Unknown sessionKey: ${raw}`);
    }
  }
  const found = await resolveSessionReference(ctx, raw, { restrictToSpawned });
  if (!isRefusal(found)) return found.parsed;
  // resolveSessionReference speaks sessions_history's texts; this tool has its own for a miss.
  return found.error.startsWith("Session not found:") ? fail(`Unknown sessionId: ${raw}`) : fail(found.error);
}

/** The model the session's next run uses: its override, else its agent's (src/runners/builtin-run.ts). */
function effectiveModel(ctx: ToolContext, agentId: string, override: string | undefined): string {
  const raw = override ?? agentModel(ctx.cfg, agentId);
  const canonical = canonicalModelRef(ctx.cfg, raw, agentId);
  return canonical.ok ? canonical.value : raw;
}

export const sessionStatusTool = defineTool({
  name: "session_status",
  description:
    'Show a session\'s status card (model, tokens, cost, context, queue, running run, sub-agents, last activity); optionally set its model override (`model`, "default" clears) or list what changed since a stateVersion you saw (`changesSince`). Defaults to your own session.',
  schema: sessionStatusSchema,
  handler: sessionStatus,
  // Sub-agents never get it (docs/contract.md): a child reads its parent's state through its task, not this.
  subagents: "none",
  keepEmpty: ["model"],
  rejectArgs: (args) => {
    const v = args.changesSince;
    // The spec's own text, not zod's, for any value that is not a whole number ≥ 0.
    if (v !== undefined && !(typeof v === "number" && Number.isSafeInteger(v) && v >= 0))
      throw invalid(CHANGES_SINCE_TEXT);
  },
  resultText: (payload) => (isRefusal(payload) ? undefined : (payload as SessionStatusResult).statusText),
});

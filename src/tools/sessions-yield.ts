import { z } from "zod";
import { callExtension } from "../session/extensions";
import type { PendingChild } from "../spawn/yield-claim";
import { NOT_SUPPORTED } from "../spawn/yield-claim";
import { type Refusal, refusal, type ToolContext } from "./context";
import { defineTool } from "./definition";

/**
 * `sessions_yield` (test/tools/sessions-yield.test.ts, docs/subagents.md "sessions_yield"): the calling
 * run ends its turn on purpose; the session resumes — once, in a new turn carrying every child's
 * result — when the children this turn spawned have all ended. The claim is one transaction in the
 * caller's object (src/spawn/yield-claim.ts) before the tool answers; the run then stops
 * (src/tools/run-tools.ts) and the batch does the rest (src/spawn/yield-batch.ts).
 */

export const DEFAULT_YIELD_MESSAGE = "Turn yielded.";
export const WAIT_FOR_INVALID = 'waitFor must be "message" when provided.';
export const DEFERRED_MESSAGE =
  "Earlier async tool results are still being delivered. Finish this response to receive them, then yield again only if external work still requires waiting.";
/** The waiting reply a yielded user turn leaves when it set no `acknowledgment` (the typographic apostrophe is OpenClaw's). */
export const DEFAULT_ACKNOWLEDGMENT = "I’m continuing this work and will send the result when it is ready.";
export const ALREADY_PENDING_END = "This turn owns no new claim, so no yield is needed: end this turn normally.";
/** A model's tool calls after its turn was yielded (the same response) are not run. */
export const TURN_ENDED = "This turn ended with sessions_yield; this tool call was not executed.";

export const sessionsYieldSchema = z.strictObject({
  message: z
    .string()
    .max(4096)
    .optional()
    .describe(
      'Private context kept (hidden) for the resumed turn; never sent to the user (default "Turn yielded."; at most 4,096 characters).',
    ),
  acknowledgment: z
    .string()
    .max(2000)
    .optional()
    .describe(
      "The short waiting reply a user's turn sends instead of the default one while the work continues (at most 2,000 characters).",
    ),
  waitFor: z
    .string()
    .max(64)
    .optional()
    .describe('Only "message": a sub-agent pausing for a continuation sent to it (not supported here: refused).'),
});
export type SessionsYieldArgs = z.infer<typeof sessionsYieldSchema>;

export interface PendingChildView {
  runId?: string;
  childSessionKey: string;
  label?: string;
  startedAt: number;
  state: "running" | "completing" | "paused";
  wakeArmed: boolean;
}

export type SessionsYieldResult =
  | { status: "yielded"; acknowledgment?: string }
  | { status: "deferred"; message: string }
  | { status: "already_pending"; message: string; pendingChildren: PendingChildView[] };

export async function sessionsYield(ctx: ToolContext, args: SessionsYieldArgs): Promise<SessionsYieldResult | Refusal> {
  if (args.waitFor !== undefined && args.waitFor !== "message") return refusal("error", WAIT_FOR_INVALID);
  // Only a model turn inside a built-in run can be ended by its own tool call: an HTTP caller has no turn,
  // and a webhook runtime ends its runs itself (docs/subagents.md).
  const turn = ctx.turn;
  if (!turn) return refusal("error", NOT_SUPPORTED);
  // Another tool call of this same response has not been seen by the model yet (a spawn beside the yield):
  // its result must reach the model first, so the turn is not ended.
  if (turn.earlierCallsInStep > 0) return { status: "deferred", message: DEFERRED_MESSAGE };
  const stub = ctx.env.SESSIONS.getByName(ctx.caller.sessionKey);
  const res = await callExtension(stub, "subagent-yield", "claim", {
    runId: turn.runId,
    message: args.message ?? DEFAULT_YIELD_MESSAGE,
    ...(args.acknowledgment ? { acknowledgment: args.acknowledgment } : {}),
    ...(args.waitFor ? { waitFor: "message" as const } : {}),
  });
  if (res.status === "error") return refusal("error", res.error);
  if (res.status === "yielded")
    return { status: "yielded", ...(args.acknowledgment ? { acknowledgment: args.acknowledgment } : {}) };
  const pendingChildren = await describePending(ctx, res.pending);
  return { status: "already_pending", message: alreadyPendingMessage(pendingChildren), pendingChildren };
}

/** Each pending child's task run and whether it yielded itself (paused): one call per child, bounded by maxChildrenPerAgent. */
async function describePending(ctx: ToolContext, pending: PendingChild[]): Promise<PendingChildView[]> {
  const views = await Promise.all(
    pending.map(async (p): Promise<PendingChildView> => {
      const child = await callExtension(
        ctx.env.SESSIONS.getByName(p.childSessionKey),
        "subagent-yield",
        "taskRun",
      ).catch(() => null);
      return {
        ...(child?.runId ? { runId: child.runId } : {}),
        childSessionKey: p.childSessionKey,
        ...(p.label ? { label: p.label } : {}),
        startedAt: p.startedAt,
        state: child?.paused && p.state === "running" ? "paused" : p.state,
        wakeArmed: p.wakeArmed,
      };
    }),
  );
  return views.sort((a, b) => a.startedAt - b.startedAt);
}

function alreadyPendingMessage(children: PendingChildView[]): string {
  const lines = children.map(
    (c) =>
      `- ${c.label ?? c.childSessionKey} (${c.childSessionKey}), ${c.state}, started ${new Date(c.startedAt).toISOString()}`,
  );
  const paused = children.some((c) => c.state === "paused");
  return [
    `Children spawned by earlier turns still owe their completion (${children.length}); it will arrive later on its own as input of this session. Do not spawn them again, re-send their tasks or poll for them.`,
    ...lines,
    ...(paused
      ? ["A paused child waits for a continuation: send it one with sessions_send if this session owns it."]
      : []),
    ALREADY_PENDING_END,
  ].join("\n");
}

/** The reply of a turn that yielded: a user's turn owes a visible waiting reply; other turns say nothing. */
export function yieldedTurnReply(kind: string, isSubagent: boolean, acknowledgment: string | undefined): string {
  return kind === "inbound" && !isSubagent ? acknowledgment?.trim() || DEFAULT_ACKNOWLEDGMENT : "";
}

export const sessionsYieldTool = defineTool({
  name: "sessions_yield",
  description:
    'End this turn on purpose while the sub-agents this turn spawned work: the session resumes in a new turn with all their results as input once every one has ended (do not poll). Returns {status:"yielded"}; "already_pending" when only children of earlier turns are pending (nothing to claim: end the turn normally); "deferred" when called beside another tool call in one response (call it again afterwards). Not a way to submit a final answer.',
  schema: sessionsYieldSchema,
  handler: sessionsYield,
  // Sub-agents keep it (a parent sub-agent yields for its own children), as in OpenClaw.
  subagents: "all",
});

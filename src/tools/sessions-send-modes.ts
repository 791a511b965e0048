import { z } from "zod";
import { BLOCKED_BY_POLICY } from "../channels/outbox";
import { fromRpcError, invalid, SwitchboardError } from "../errors";
import { isSilentReply } from "../send/control-tokens";
import { MAX_NOTIFICATION_BYTES, MAX_PENDING_STEERS, MAX_STEER_BYTES } from "../send/send-inbox";
import type { ModeSendRequest } from "../send/send-modes";
import { storedTextBytes } from "../session/byte-budget";
import { callExtension } from "../session/extensions";
import type { Provenance, RunSnapshot } from "../session/types";
import { type Refusal, refusal, type ToolContext, timed } from "./context";

/**
 * sessions_send's `mode` (OpenClaw 2026's; docs/contract.md, "sessions_send modes"). Omitted, a send
 * behaves as the classic specification says and its results stay the classic ones (src/tools/sessions-send.ts).
 * Given, the results are OpenClaw 2026's: `targetDisposition`, `delivery` `pending | skipped`, `no_reply`.
 *
 * - `followup`: a turn of its own, queued behind whatever runs — the classic delivery, never a steer.
 * - `steer`: the text joins the target's running run at its next model step; never waits.
 * - `notify`: context for the target's next turn; starts and wakes nothing; never waits.
 * OpenClaw keeps steers and notifications in process memory; here both are rows of the target (src/send/send-inbox.ts).
 */
export const SEND_MODES = ["steer", "followup", "notify"] as const;
export type SendMode = (typeof SEND_MODES)[number];

export const sendModeSchema = z
  .enum(SEND_MODES)
  .optional()
  .describe(
    "Omitted: the classic send. `followup`: a new turn queued behind any running one. `steer`: guidance for the target's running run, read at its next model step (never waits). `notify`: context for the target's next turn, starting nothing (never waits).",
  );

export const MODE_TEXT = "mode must be notify, steer, or followup";
/** OpenClaw's `resume` continues a sub-agent paused by sessions_yield; nothing here pauses a run, so there is nothing to resume. */
export const RESUME_UNSUPPORTED =
  "mode=resume is not supported: this gateway never pauses a sub-agent run, so there is none to resume. Use mode=followup to start a new turn.";
export const MISSING_TARGET =
  "Cannot notify, steer, or resume a missing session. Use mode=followup to start a new turn.";
export const NO_ACTIVE_RUN = "Target has no active run that accepts steering. Use mode=followup to start a new turn.";
export const STEERS_FULL = `Target run already has ${MAX_PENDING_STEERS} steering messages it has not read yet. Use mode=followup to start a new turn.`;
export const NO_REPLY_TEXT = "No visible reply or pending announcement. Continue or retry if needed.";

/** OpenClaw 2026's other names for `message`, read (in this order) only when `message` itself is absent. */
export const MESSAGE_ALIASES = ["SendMessage", "content", "text"] as const;

/**
 * Before the schema: a `message` given under one of OpenClaw's aliases is read as `message` (an alias
 * beside `message`, or a second one, stays an unknown parameter: the schema is closed); `resume` and
 * unknown modes get their own texts (a 400 naming them), not zod's enum message.
 */
export function prepareSendArgs(args: Record<string, unknown>): void {
  if (args.message === undefined) {
    const alias = MESSAGE_ALIASES.find((a) => args[a] !== undefined);
    if (alias) {
      args.message = args[alias];
      delete args[alias];
    }
  }
  const mode = args.mode;
  if (mode === undefined) return;
  if (mode === "resume") throw invalid(RESUME_UNSUPPORTED);
  if (typeof mode !== "string" || !(SEND_MODES as readonly string[]).includes(mode)) throw invalid(MODE_TEXT);
}

/** OpenClaw 2026's delivery: `pending` when an announce will be posted, `skipped` otherwise (a steer, no route). */
export type ModeDelivery = { status: "pending" | "skipped"; mode: "announce" };

export type ModeResult =
  | {
      runId: string;
      status: "accepted";
      sessionKey: string;
      targetDisposition: "queued" | "steered";
      delivery: ModeDelivery;
    }
  | { runId: string; status: "ok"; sessionKey: string; delivery: ModeDelivery; reply: string }
  | { runId: string; status: "no_reply"; sessionKey: string; message: string }
  | { runId: string; status: "timeout" | "error"; error: string; sentBeforeError: true; sessionKey: string }
  | {
      status: "queued";
      sessionKey: string;
      notificationId: string;
      durability: "durable";
      runStarted: false;
    }
  | Refusal;

/**
 * A followup's result. Unlike the classic send, a wait that ends while the run goes on is `accepted`
 * (the reply comes through the announce), `timeout` means the run itself timed out, and a finished run
 * without visible text is `no_reply` (nothing will be announced).
 */
export function followupResult(run: RunSnapshot, sessionKey: string, delivery: ModeDelivery): ModeResult {
  const runId = run.runId;
  switch (run.status) {
    case "ok":
      if (run.reply && !isSilentReply(run.reply))
        return { runId, status: "ok", sessionKey, delivery, reply: run.reply };
      return { runId, status: "no_reply", sessionKey, message: NO_REPLY_TEXT };
    case "error":
    case "lost":
      return { runId, status: "error", error: run.error || "agent error", sentBeforeError: true, sessionKey };
    case "timeout":
    case "aborted":
      return { runId, status: "timeout", error: run.error || "Run aborted", sentBeforeError: true, sessionKey };
    default:
      return { runId, status: "accepted", sessionKey, targetDisposition: "queued", delivery };
  }
}

/** What a steer or notify needs of the resolved send (src/tools/sessions-send.ts). */
export interface ModeTarget {
  targetKey: string;
  shownKey: string;
  provenance: Provenance;
  /** The refusal a non-child target gets when only the target's parent may send (null: any lineage). */
  asNonChild: Refusal | null;
  requesterKey: string;
  idempotencyKey?: string;
}

function sizeCheck(mode: "steer" | "notify", message: string): void {
  const max = mode === "steer" ? MAX_STEER_BYTES : MAX_NOTIFICATION_BYTES;
  const bytes = storedTextBytes(message);
  if (bytes > max)
    throw new SwitchboardError(
      "payload_too_large",
      `message: ${bytes} bytes exceeds the limit of ${max} bytes for mode=${mode} (see docs/limits.md)`,
    );
}

function refuse(status: Refusal["status"], error: string, sessionKey: string): Refusal {
  return refusal(status, error, { runId: crypto.randomUUID(), sessionKey });
}

/** Checked before anything is resolved, so an oversized steer or notification costs no round trip. */
export function checkModeMessage(mode: SendMode | undefined, message: string): void {
  if (mode === "steer" || mode === "notify") sizeCheck(mode, message);
}

/** `steer` and `notify`: one call into the target, which checks and stores the message in one transaction. */
export async function sendWithoutTurn(
  ctx: ToolContext,
  mode: "steer" | "notify",
  message: string,
  t: ModeTarget,
): Promise<ModeResult> {
  const req: ModeSendRequest = {
    message,
    provenance: t.provenance,
    ...(t.idempotencyKey ? { idempotencyKey: t.idempotencyKey } : {}),
    ...(t.asNonChild ? { requireChildOf: t.requesterKey } : {}),
  };
  const stub = ctx.env.SESSIONS.getByName(t.targetKey);
  try {
    if (mode === "notify") {
      const r = await timed(ctx, "notify", callExtension(stub, "send-modes", "notify", req));
      if ("refused" in r) return modeRefusal(r.refused, t);
      return {
        status: "queued",
        sessionKey: t.shownKey,
        notificationId: r.notificationId,
        durability: "durable",
        runStarted: false,
      };
    }
    const r = await timed(ctx, "steer", callExtension(stub, "send-modes", "steer", req));
    if ("refused" in r) return modeRefusal(r.refused, t);
    // As in OpenClaw, the runId of a steer is the steer's own id, not the steered run's.
    return {
      runId: r.steerId,
      status: "accepted",
      sessionKey: t.shownKey,
      targetDisposition: "steered",
      delivery: { status: "skipped", mode: "announce" },
    };
  } catch (err) {
    const e = fromRpcError(err);
    return refuse("error", e instanceof Error ? e.message : String(e), t.shownKey);
  }
}

function modeRefusal(why: "missing" | "lineage" | "policy" | "no_active_run" | "full", t: ModeTarget): Refusal {
  switch (why) {
    case "missing":
      return refuse("error", MISSING_TARGET, t.shownKey);
    case "policy":
      return refuse("error", BLOCKED_BY_POLICY, t.shownKey);
    case "lineage":
      return { ...(t.asNonChild as Refusal), runId: crypto.randomUUID(), sessionKey: t.shownKey };
    case "no_active_run":
      return refuse("error", NO_ACTIVE_RUN, t.shownKey);
    case "full":
      return refuse("error", STEERS_FULL, t.shownKey);
  }
}

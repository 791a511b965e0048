import { z } from "zod";
import { callExtension } from "../session/extensions";
import type { ToolContext } from "./context";

/**
 * sessions_send's `watch` (docs/events.md, "Watchers and notices"): after the message was admitted, the caller
 * becomes a watcher of the session that received it, from that session's current state version, and gets one
 * notice whenever another actor changes it (src/events/watchers.ts). The result then says `watched`.
 */
export const watchSchema = z
  .boolean()
  .optional()
  .describe(
    "After the message is accepted, watch the target: when another actor (a person, another session) later messages it, your next turn gets one notice to reconcile with session_status changesSince. The result says `watched`.",
  );

/**
 * Register the caller after admission; undefined when `watch` was not asked for (the result then has no
 * `watched`). False for a send into the caller's own session, a caller without a session of its own (no turn
 * would read the notice), a target at its watcher bound, or a registration that failed — the message itself
 * was accepted either way, so a failure here is reported, not thrown.
 */
export async function watchAfterAdmission(
  ctx: ToolContext,
  watch: boolean | undefined,
  targetKey: string,
  requesterExists: boolean,
): Promise<boolean | undefined> {
  if (watch !== true) return undefined;
  const watcher = ctx.caller.sessionKey;
  if (watcher === targetKey || !requesterExists) return false;
  try {
    const r = await callExtension(ctx.env.SESSIONS.getByName(targetKey), "watchers", "register", { watcher });
    return r.watched;
  } catch {
    return false;
  }
}

/** The result with `watched` when it was asked for (called only for an admitted message). */
export function withWatched<T>(result: T, watched: boolean | undefined): T {
  return watched === undefined ? result : { ...result, watched };
}

import type { Config } from "../config/schema";
import { invalid, SwitchboardError } from "../errors";
import { type ParsedKey, parseCanonical } from "../keys";

/**
 * `session.dmScope` (OpenClaw's key, default "main"): which session a direct message posted to an
 * agent's main session runs in. A channel gateway posts every DM to `main` with `chatType: "direct"`,
 * its `channel` and the peer in `to`; under
 *   "main"                     → the agent's main session (all DMs share it),
 *   "per-peer"                 → `agent:<id>:direct:<peer>`,
 *   "per-channel-peer"         → `agent:<id>:<channel>:direct:<peer>`,
 *   "per-account-channel-peer" → `agent:<id>:<channel>:<accountId|default>:direct:<peer>`.
 * Any other message (a named key, a group, no channel or peer) and `session.scope = "global"` (all DMs
 * in the global bucket) keep their target. Tests: test/policy/dm-scope.test.ts.
 */
export function dmSessionTarget(
  cfg: Config,
  target: ParsedKey,
  msg: { channel?: string; to?: string; accountId?: string; chatType?: string },
): ParsedKey {
  const scope = cfg.session.dmScope;
  if (scope === "main" || cfg.session.scope === "global" || target.kind !== "main") return target;
  if (msg.chatType !== "direct" || !msg.channel || !msg.to) return target;
  const channel = msg.channel.toLowerCase();
  const peer = msg.to.trim().toLowerCase();
  const rest =
    scope === "per-peer"
      ? `direct:${peer}`
      : scope === "per-channel-peer"
        ? `${channel}:direct:${peer}`
        : `${channel}:${(msg.accountId ?? "default").trim().toLowerCase() || "default"}:direct:${peer}`;
  try {
    return parseCanonical(`agent:${target.agentId}:${rest}`, cfg);
  } catch (err) {
    const why = err instanceof SwitchboardError ? err.message : String(err);
    throw invalid(`to: not usable as a DM peer under session.dmScope "${scope}" (${why})`);
  }
}

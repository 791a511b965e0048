import { keyContextOf, looksLikeSessionKey, type ParsedKey, parseSessionKey, SESSION_ID_RE } from "../keys";
import {
  checkSessionAccess,
  type GuardAction,
  isAgentToAgentAllowed,
  resolveEffectiveVisibility,
  type Visibility,
} from "../policy/visibility";
import { sessionIndex } from "../registry/session-index";
import { type Refusal, refusal, type ToolContext } from "./context";

export interface ResolvedTarget {
  parsed: ParsedKey;
}

/** Effective visibility of the caller (config, sandbox clamp) (test/policy/policy.test.ts). */
export function callerVisibility(ctx: ToolContext): { visibility: Visibility; restrictToSpawned: boolean } {
  return resolveEffectiveVisibility({
    configured: ctx.cfg.tools.sessions.visibility,
    sandboxed: ctx.caller.sandboxed,
    sandboxClamp: ctx.cfg.agents.defaults.sandbox.sessionToolsVisibility,
    requesterIsSubagent: ctx.caller.isSubagent,
  });
}

/** Who a listing or search may see: the scope each agent's index applies in its own query, and the agents asked. */
export interface VisibleScope {
  scope: { type: "self"; key: string } | { type: "tree"; key: string } | { type: "agent" };
  /** The caller's agent, then — under `all` — every other agent agentToAgent allows. */
  agents: string[];
  /** The effective visibility (the sandbox clamp applied). */
  visibility: Visibility;
}

/**
 * The one reading of visibility for tools that ask every visible agent's index (sessions_list,
 * sessions_search): `self`/`tree` narrow to the caller's session (tree: and what it spawned), and only
 * `all` reaches other agents, as `tools.agentToAgent` allows (src/policy/visibility.ts).
 */
export function visibleScope(ctx: ToolContext): VisibleScope {
  const vis = callerVisibility(ctx);
  const visibility = vis.restrictToSpawned ? "tree" : vis.visibility;
  const me = ctx.caller.sessionKey;
  const scope: VisibleScope["scope"] =
    visibility === "self"
      ? { type: "self", key: me }
      : visibility === "tree"
        ? { type: "tree", key: me }
        : { type: "agent" };
  const own = ctx.caller.agentId;
  const others =
    visibility === "all"
      ? ctx.cfg.agents.roster
          .map((a) => a.id)
          .filter((id) => id !== own && isAgentToAgentAllowed(ctx.cfg.tools.agentToAgent, own, id))
      : [];
  return { scope, agents: [own, ...others], visibility };
}

/** Parse a key given by a tool caller (aliases resolve against the caller's agent and session). */
export function parseTargetKey(ctx: ToolContext, raw: string): ParsedKey {
  return parseSessionKey(raw, keyContextOf(ctx.cfg, ctx.caller.agentId, ctx.caller.sessionKey));
}

/**
 * Resolve the `sessionKey` parameter of history/send (test/tools/sessions-history.test.ts): keys and aliases parse
 * directly (a well-formed key that does not exist yet is accepted); anything else is looked up as a
 * sessionId (or a custom key) in the registry, scoped to the caller's children when sandboxed.
 */
export async function resolveSessionReference(
  ctx: ToolContext,
  raw: string,
  opts: { restrictToSpawned: boolean },
): Promise<ResolvedTarget | Refusal> {
  const input = raw.trim();
  if (looksLikeSessionKey(input)) return { parsed: parseTargetKey(ctx, input) };

  const value = input.toLowerCase();
  const spawnedBy = opts.restrictToSpawned ? ctx.caller.sessionKey : undefined;
  const agents = [
    ctx.caller.agentId,
    ...ctx.cfg.agents.roster.map((a) => a.id).filter((id) => id !== ctx.caller.agentId),
  ];

  // A custom key (e.g. "sess-group") keeps working when such a session exists.
  if (!SESSION_ID_RE.test(value)) {
    try {
      const custom = parseTargetKey(ctx, value);
      const hit = await sessionIndex(ctx.env, ctx.cfg, custom.agentId).get(custom.canonicalKey);
      if (hit && (!spawnedBy || hit.spawnedBy === spawnedBy || hit.key === ctx.caller.sessionKey))
        return { parsed: custom };
    } catch {
      // not a usable key either: fall through to sessionId lookup
    }
  }
  const found: string[] = [];
  for (const agentId of agents) {
    found.push(...(await sessionIndex(ctx.env, ctx.cfg, agentId).resolveSessionId(value, spawnedBy)));
    if (found.length > 0) break;
  }
  if (found.length === 0) {
    if (opts.restrictToSpawned)
      return refusal("forbidden", `Session not visible from this sandboxed agent session: ${input}`);
    return refusal("error", `Session not found: ${input} (use the full sessionKey from sessions_list)`);
  }
  if (found.length > 1)
    return refusal("error", `Multiple sessions found for sessionId: ${input} (${found.join(", ")})`);
  return { parsed: parseTargetKey(ctx, found[0]) };
}

/**
 * Visibility guard for one target (test/policy/policy.test.ts). `targetSpawnedBy` is only needed for `tree`,
 * so callers pass it from data they already read (no extra round trip).
 */
export function guardTarget(
  ctx: ToolContext,
  action: GuardAction,
  target: ParsedKey,
  targetSpawnedBy: string | null | undefined,
  vis: { visibility: Visibility; restrictToSpawned: boolean },
  rawInput: string,
): Refusal | null {
  if (
    vis.restrictToSpawned &&
    target.canonicalKey !== ctx.caller.sessionKey &&
    targetSpawnedBy !== ctx.caller.sessionKey
  ) {
    return refusal("forbidden", `Session not visible from this sandboxed agent session: ${rawInput}`);
  }
  const res = checkSessionAccess({
    action,
    requesterKey: ctx.caller.sessionKey,
    requesterAgentId: ctx.caller.agentId,
    targetKey: target.canonicalKey,
    targetAgentId: target.agentId,
    targetSpawnedBy: targetSpawnedBy ?? null,
    visibility: vis.visibility,
    a2a: ctx.cfg.tools.agentToAgent,
  });
  return res.ok ? null : refusal("forbidden", res.error);
}

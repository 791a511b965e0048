/**
 * Which sessions a requester may list / read / send to / inspect (test/policy/policy.test.ts). Pure decisions;
 * callers supply the facts (agent ids, the target's `spawnedBy`) and turn a denial into `forbidden`.
 */

export type Visibility = "self" | "tree" | "agent" | "all";
export type GuardAction = "list" | "history" | "send" | "status" | "search";

export interface AgentToAgentPolicy {
  enabled?: boolean;
  allow?: string[];
}

const VISIBILITIES: readonly Visibility[] = ["self", "tree", "agent", "all"];

function matchesAllowPattern(pattern: unknown, agentId: string): boolean {
  const raw = typeof pattern === "string" ? pattern.trim() : "";
  // A blank entry matches nobody (it is not the same as an empty list, which allows everyone).
  if (!raw) return false;
  if (raw === "*") return true;
  if (!raw.includes("*")) return raw.toLowerCase() === agentId;
  const escaped = raw.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*");
  return new RegExp(`^${escaped}$`, "i").test(agentId);
}

/** `tools.agentToAgent`: same agent always; otherwise enabled must be exactly `true` and both ids allowed. */
export function isAgentToAgentAllowed(
  policy: AgentToAgentPolicy | undefined,
  fromAgent: string,
  toAgent: string,
): boolean {
  const from = fromAgent.trim().toLowerCase();
  const to = toAgent.trim().toLowerCase();
  if (from === to) return true;
  // `=== true`: a config typo such as `"true"` or `1` must not open cross-agent access.
  if (policy?.enabled !== true) return false;
  const allow = Array.isArray(policy.allow) ? policy.allow : [];
  if (allow.length === 0) return true;
  return allow.some((p) => matchesAllowPattern(p, from)) && allow.some((p) => matchesAllowPattern(p, to));
}

export function resolveEffectiveVisibility(input: {
  configured?: string;
  sandboxed: boolean;
  sandboxClamp?: "spawned" | "all";
  requesterIsSubagent: boolean;
}): { visibility: Visibility; restrictToSpawned: boolean } {
  const configured = typeof input.configured === "string" ? input.configured.trim().toLowerCase() : "";
  let visibility: Visibility = (VISIBILITIES as readonly string[]).includes(configured)
    ? (configured as Visibility)
    : "tree";
  const clampSpawned = (input.sandboxClamp ?? "spawned") === "spawned";
  // OpenClaw clamps *every* mode to tree, which widens `self`; we keep that for parity.
  if (input.sandboxed && clampSpawned) visibility = "tree";
  // OpenClaw exempts sub-agent requesters (test/policy/policy.test.ts): their lookups are not filtered by `spawnedBy`.
  const restrictToSpawned = input.sandboxed && clampSpawned && !input.requesterIsSubagent;
  return { visibility, restrictToSpawned };
}

const SESSION_LABEL: Record<GuardAction, string> = {
  history: "Session history",
  send: "Session send",
  status: "Session status",
  list: "Session list",
  search: "Session search",
};

const A2A_DISABLED: Record<GuardAction, string> = {
  history: "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
  send: "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.",
  status: "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
  list: "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility.",
  search: "Agent-to-agent search is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
};

const A2A_NOUN: Record<GuardAction, string> = {
  history: "history",
  send: "messaging",
  status: "status",
  list: "listing",
  search: "search",
};

/**
 * Cross-agent below `all`. The classic tools (list, history, send) keep the classic text, which their
 * specification governs; session_status and sessions_search are OpenClaw 2026 tools and speak its text, which
 * adds where agent pairs are restricted (docs/contract.md, docs/openclaw-2026-coverage.md; pinned by
 * test/policy/policy.test.ts).
 */
const CROSS_AGENT: Record<GuardAction, string> = {
  history: "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
  send: "Session send visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
  list: "Session list visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.",
  status:
    "Session status visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.",
  search:
    "Session search visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.",
};

export type VisibilityErrorKind = "crossAgent" | "a2aDisabled" | "a2aDenied" | "self" | "tree";

/** The exact denial texts of OpenClaw's guard. */
export function visibilityError(action: GuardAction, kind: VisibilityErrorKind): string {
  switch (kind) {
    case "crossAgent":
      return CROSS_AGENT[action];
    case "a2aDisabled":
      return A2A_DISABLED[action];
    case "a2aDenied":
      return `Agent-to-agent ${A2A_NOUN[action]} denied by tools.agentToAgent.allow.`;
    case "self":
      return `${SESSION_LABEL[action]} visibility is restricted to the current session (tools.sessions.visibility=self).`;
    case "tree":
      return `${SESSION_LABEL[action]} visibility is restricted to the current session tree (tools.sessions.visibility=tree).`;
  }
}

export type AccessResult = { ok: true } | { ok: false; error: string };

export function checkSessionAccess(input: {
  action: GuardAction;
  requesterKey: string;
  requesterAgentId: string;
  targetKey: string;
  targetAgentId: string;
  targetSpawnedBy?: string | null;
  visibility: Visibility;
  a2a?: AgentToAgentPolicy;
}): AccessResult {
  const { action, visibility } = input;
  const deny = (kind: VisibilityErrorKind): AccessResult => ({ ok: false, error: visibilityError(action, kind) });

  if (input.requesterAgentId.toLowerCase() !== input.targetAgentId.toLowerCase()) {
    // Cross-agent needs both `all` and the agent-to-agent policy; self/tree/agent never reach another agent.
    if (visibility !== "all") return deny("crossAgent");
    if (input.a2a?.enabled !== true) return deny("a2aDisabled");
    if (!isAgentToAgentAllowed(input.a2a, input.requesterAgentId, input.targetAgentId)) return deny("a2aDenied");
    return { ok: true };
  }

  const isSelf = input.targetKey === input.requesterKey;
  if (visibility === "self" && !isSelf) return deny("self");
  if (visibility === "tree" && !isSelf) {
    // Direct children only, as in OpenClaw (no recursion into grandchildren).
    const isChild = !!input.targetSpawnedBy && input.targetSpawnedBy === input.requesterKey;
    if (!isChild) return deny("tree");
  }
  return { ok: true };
}

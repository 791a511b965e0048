/** Who presented the bearer token (docs/contract.md, "Authentication and scopes"). */
export type Principal =
  | { role: "operator" }
  | { role: "agent"; agentId: string }
  | { role: "run"; agentId: string; sessionKey: string; runId: string; isSubagent: boolean };

/**
 * Whose idempotency keys these are (docs/contract.md, "Idempotency"): a caller-chosen key is stored under its
 * principal, so one token can never pre-claim another's keys (an agent token guessing a bridge's predictable
 * keys would swallow the bridge's messages). The operator is one principal; each agent token is its agent's;
 * a run token is its run's; a built-in run's tool calls are the gateway's own ("internal").
 */
export function idempotencyScope(p: { role: string; agentId?: string; runId?: string }): string {
  if (p.role === "agent") return `agent:${p.agentId}`;
  if (p.role === "run") return `run:${p.runId}`;
  return p.role;
}

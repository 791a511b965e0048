/** Who presented the bearer token (README "Call it from an agent"; docs/contract.md). */
export type Principal =
  | { role: "operator" }
  | { role: "agent"; agentId: string }
  | { role: "run"; agentId: string; sessionKey: string; runId: string; isSubagent: boolean };

import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill } from "@a2a-js/sdk";
import type { AgentConfig } from "../config/agents-schema";

/** Where an agent's A2A endpoint and card live (docs/protocols.md, "A2A"). */
export const a2aPath = (agentId: string) => `/a2a/${agentId}`;

/** The scheme names of the card: both are `Authorization: Bearer` tokens (src/http/auth.ts). */
const GATEWAY_SCHEME = "gatewayToken";
const AGENT_SCHEME = "agentToken";

const bearer = (description: string) => ({
  scheme: {
    $case: "httpAuthSecurityScheme" as const,
    value: { description, scheme: "Bearer", bearerFormat: "opaque" },
  },
});

/**
 * One configured agent as an A2A agent. Public, so nothing secret: no system prompt, model, runtime URL or token —
 * the agent's id and name, what it offers, and which tokens it accepts (the gateway's, or this agent's own from
 * `AGENT_TOKENS`; another agent's token is refused). Its one skill is what every Switchboard agent offers: a
 * conversation turn in one of its sessions (the context id names which).
 */
export function agentCard(origin: string, agent: AgentConfig): AgentCard {
  const name = agent.name ?? agent.id;
  const skills: AgentSkill[] = [
    {
      id: "converse",
      name: `Talk to ${name}`,
      description: `Each message is one turn of agent "${agent.id}" in the session its contextId names (a new session when there is none); the reply is the task's artifact.`,
      tags: ["chat", "session"],
      examples: [],
      inputModes: ["text/plain"],
      outputModes: ["text/plain"],
      securityRequirements: [],
    },
  ];
  return {
    name,
    description: `Switchboard agent "${agent.id}": its sessions, runs and tools behind one gateway.`,
    // Both bindings at one URL: JSON-RPC is POST to it, HTTP+JSON the paths below it (src/http/routes/a2a-rest.ts).
    // JSON-RPC first: a client that speaks both and takes the first it supports keeps using it.
    supportedInterfaces: (["JSONRPC", "HTTP+JSON"] as const).map((protocolBinding) => ({
      url: `${origin}${a2aPath(agent.id)}`,
      protocolBinding,
      tenant: "",
      protocolVersion: A2A_PROTOCOL_VERSION,
    })),
    provider: undefined,
    version: "1.0.0",
    documentationUrl: `${origin}/docs`,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [GATEWAY_SCHEME]: bearer("The gateway's operator token (GATEWAY_TOKEN)"),
      [AGENT_SCHEME]: bearer(`The token of agent "${agent.id}" (AGENT_TOKENS)`),
    },
    // Either token will do: two requirements, each of one scheme.
    securityRequirements: [
      { schemes: { [GATEWAY_SCHEME]: { list: [] } } },
      { schemes: { [AGENT_SCHEME]: { list: [] } } },
    ],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills,
    signatures: [],
    iconUrl: undefined,
  };
}

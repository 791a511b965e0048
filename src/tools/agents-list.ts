import { z } from "zod";
import type { Config } from "../config/schema";
import type { ToolContext } from "./context";
import { defineTool } from "./definition";

export const agentsListSchema = z.strictObject({});

export interface AgentsListResult {
  requester: string;
  allowAny: boolean;
  agents: { id: string; name?: string; configured: boolean }[];
}

/** Agent ids the requester may target with sessions_spawn (test/tools/agents-list.test.ts). */
export function spawnAllowlist(cfg: Config, requesterAgentId: string): { allowAny: boolean; ids: string[] } {
  const agent = cfg.agents.roster.find((a) => a.id === requesterAgentId);
  const list = agent?.subagents?.allowAgents ?? cfg.agents.defaults.subagents.allowAgents ?? [];
  const allowAny = list.some((x) => x.trim() === "*");
  const ids = allowAny ? cfg.agents.roster.map((a) => a.id) : list.map((x) => x.trim().toLowerCase()).filter(Boolean);
  return { allowAny, ids };
}

export async function agentsList(ctx: ToolContext): Promise<AgentsListResult> {
  const requester = ctx.caller.agentId;
  const { allowAny, ids } = spawnAllowlist(ctx.cfg, requester);
  const others = [...new Set(ids.filter((id) => id !== requester))].sort((a, b) => a.localeCompare(b));
  const agents = [requester, ...others].map((id) => {
    const a = ctx.cfg.agents.roster.find((x) => x.id === id);
    return { id, ...(a?.name?.trim() ? { name: a.name } : {}), configured: Boolean(a) };
  });
  return { requester, allowAny, agents };
}

export const agentsListTool = defineTool({
  name: "agents_list",
  description: "List agent ids you can target with `sessions_spawn` (based on subagent allowlists).",
  schema: agentsListSchema,
  handler: (ctx) => agentsList(ctx),
  subagents: "none",
});

import { type ToolSet, tool } from "ai";
import { isAgentSandboxed, loadConfig } from "../config/load";
import type { SessionMeta } from "../session/types";
import type { Caller } from "./context";
import { invokeTool, toolsFor } from "./registry";

/**
 * The session tools offered to a model inside a built-in run, acting as that run's session.
 * The same registry filter applies as over HTTP, so a sub-agent's model never sees a tool the
 * gateway would refuse it.
 */
export function buildRunTools(env: Env, meta: SessionMeta): ToolSet {
  const cfg = loadConfig(env);
  const caller: Caller = {
    agentId: meta.agentId,
    sessionKey: meta.key,
    role: "internal",
    sandboxed: isAgentSandboxed(cfg, meta.agentId),
    isSubagent: meta.key.includes(":subagent:"),
    ...(meta.spawnDepth !== undefined ? { spawnDepth: meta.spawnDepth } : {}),
  };
  const set: ToolSet = {};
  for (const def of toolsFor(caller, cfg)) {
    set[def.name] = tool({
      description: def.description,
      inputSchema: def.schema,
      execute: async (args: unknown) => {
        try {
          return await invokeTool({ env, cfg, caller }, def.name, args);
        } catch (err) {
          return { status: "error", error: err instanceof Error ? err.message : String(err) };
        }
      },
    });
  }
  return set;
}

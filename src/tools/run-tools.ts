import { type Schema, type ToolSet, tool, zodSchema } from "ai";
import type { z } from "zod";
import { isSessionSandboxed, loadConfig } from "../config/load";
import type { SessionMeta } from "../session/types";
import type { Caller } from "./context";
import { invokeTool, type ToolDefinition, toolsFor } from "./registry";

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
    sandboxed: isSessionSandboxed(cfg, meta.agentId, meta.key),
    isSubagent: meta.key.includes(":subagent:"),
    ...(meta.spawnDepth !== undefined ? { spawnDepth: meta.spawnDepth } : {}),
  };
  const set: ToolSet = {};
  for (const def of toolsFor(caller, cfg)) {
    set[def.name] = tool({
      description: def.description,
      inputSchema: runSchemaOf(def),
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

/**
 * The AI SDK schema of a tool, made once per isolate. Given the zod schema itself, the SDK converts it to
 * JSON Schema again in every step of every run (~4% of a send burst's CPU, docs/scale.md); its `zodSchema`
 * converts lazily once and keeps the result, and validates a model's input with the same zod schema as
 * before, so providers see the same JSON Schema and bad input gets the same error (test/tools/run-tools.test.ts).
 */
function runSchemaOf(def: ToolDefinition): Schema {
  let schema = RUN_SCHEMAS.get(def.schema);
  if (!schema) {
    schema = zodSchema(def.schema);
    RUN_SCHEMAS.set(def.schema, schema);
  }
  return schema;
}
const RUN_SCHEMAS = new WeakMap<z.ZodType, Schema>();

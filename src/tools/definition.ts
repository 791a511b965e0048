import type { z } from "zod";
import type { ToolContext } from "./context";

/**
 * What a tool is: its zod schema and handler serve `/tools/invoke`, `/mcp`, the OpenAPI document, the
 * JSON-Schema catalog and the tools offered to models inside runs. Each tool module exports one
 * `defineTool({...})`; src/tools/registry.ts lists them all (AGENTS.md, "Add a tool").
 */
export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  schema: S;
  // Method syntax on purpose: a tool's handler takes its own schema's arguments, and the registry's
  // list of all tools (ToolDefinition<z.ZodObject>[]) holds each without a cast.
  handler(ctx: ToolContext, args: z.infer<S>): Promise<unknown>;
  /**
   * Which sub-agents get the tool without `tools.subagents.tools.allow` (src/tools/registry.ts `toolsFor`):
   * `"all"` (not a session tool), `"orchestrators"` (sub-agents that may still spawn, depth < maxSpawnDepth)
   * or `"none"`. Main sessions get every tool.
   */
  subagents: "all" | "orchestrators" | "none";
  /**
   * A tool that waits server-side: the argument holding the wait in seconds and its default. MCP caps
   * it (src/http/mcp.ts) and reports progress while it lasts.
   */
  wait?: { argument: string; defaultSeconds: number };
  /**
   * The call starts a run and can answer with that run as an MCP task instead of waiting for it
   * (src/http/mcp-tasks.ts; docs/protocols.md, "MCP tasks"): its `runId` result field is the task id.
   * Over MCP such a tool is listed with `execution.taskSupport: "optional"`.
   */
  task?: true;
  /** Refuse arguments that need their own message before the schema sees them (throws a 400). */
  rejectArgs?: (args: Record<string, unknown>) => void;
  /** Parameters where an empty string means something (session_status `model: ""` clears), not "absent". */
  keepEmpty?: readonly string[];
  /**
   * The text block of a result, when it is not the payload's JSON (session_status: its status card).
   * undefined: the JSON. `/tools/invoke` and `/mcp` both use it (src/tools/registry.ts `toolResultText`).
   */
  resultText?: (payload: unknown) => string | undefined;
}

/** A tool's definition, typed by its schema (the handler's `args` are the schema's output). */
export function defineTool<S extends z.ZodObject>(def: ToolDefinition<S>): ToolDefinition<S> {
  return def;
}

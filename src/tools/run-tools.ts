import { type Schema, type ToolSet, tool, zodSchema } from "ai";
import type { z } from "zod";
import { isSessionSandboxed, loadConfig } from "../config/load";
import type { SessionMeta } from "../session/types";
import type { Caller } from "./context";
import { invokeTool, type ToolDefinition, toolsFor } from "./registry";
import { TURN_ENDED } from "./sessions-yield";

/**
 * The model turn of one built-in run, shared by its tool calls and its runner: set once a
 * `sessions_yield` call claimed the turn, which stops the run after that step (src/runners/builtin-run.ts).
 */
export interface RunTurn {
  runId: string;
  yielded: { acknowledgment?: string } | null;
}

/**
 * The session tools offered to a model inside a built-in run, acting as that run's session.
 * The same registry filter applies as over HTTP, so a sub-agent's model never sees a tool the
 * gateway would refuse it.
 */
export function buildRunTools(env: Env, meta: SessionMeta, turn?: RunTurn): ToolSet {
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
  // Tool calls started per model response, keyed by the size of the messages that response answered (the
  // same for every call of one response): a sessions_yield after another call of its response is deferred.
  const startedPerStep = new Map<number, number>();
  // A sessions_yield call of a response: the calls after it in that response wait for its outcome and are
  // not run when it ended the turn (the AI SDK runs a response's calls concurrently).
  const yieldPerStep = new Map<number, Promise<unknown>>();
  for (const def of toolsFor(caller, cfg)) {
    set[def.name] = tool({
      description: def.description,
      inputSchema: runSchemaOf(def),
      execute: async (args: unknown, options?: { messages?: unknown[] }) => {
        const step = options?.messages?.length ?? 0;
        const earlierCallsInStep = startedPerStep.get(step) ?? 0;
        startedPerStep.set(step, earlierCallsInStep + 1);
        const yieldBefore = yieldPerStep.get(step);
        const run = (async () => {
          await yieldBefore?.catch(() => undefined);
          // The turn was yielded by an earlier call: this call is not run.
          if (turn?.yielded) return { status: "error", error: TURN_ENDED };
          const ctx = { env, cfg, caller, ...(turn ? { turn: { runId: turn.runId, earlierCallsInStep } } : {}) };
          const out = await invokeTool(ctx, def.name, args);
          if (turn && def.name === "sessions_yield" && (out as { status?: string } | null)?.status === "yielded")
            turn.yielded = { acknowledgment: (args as { acknowledgment?: string } | null)?.acknowledgment };
          return out;
        })();
        // Set before any await, so a later call of the same response always sees it.
        if (def.name === "sessions_yield") yieldPerStep.set(step, run);
        try {
          return await run;
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

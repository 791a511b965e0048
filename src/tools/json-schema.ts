import { z } from "zod";
import type { ToolDefinition } from "./definition";

/** A JSON Schema (draft 2020-12) object, as produced by `z.toJSONSchema`. */
export type JsonSchema = Record<string, unknown>;

/**
 * JSON Schema of a zod schema, for MCP, OpenAPI 3.1 and the tool catalog. Derived, never written by
 * hand, so the documents cannot drift from the validators. `io: "input"` describes what a caller may
 * send (defaults optional); the `$schema` marker is dropped because the schema is embedded.
 */
export function jsonSchemaOf(schema: z.ZodType, io: "input" | "output" = "input"): JsonSchema {
  // Schemas are fixed once their modules load: convert each once, not on every tools/list or catalog call.
  const byIo = CACHE.get(schema) ?? new Map<string, JsonSchema>();
  CACHE.set(schema, byIo);
  let out = byIo.get(io);
  if (!out) {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema;
    out = rest;
    byIo.set(io, out);
  }
  return out;
}
const CACHE = new WeakMap<z.ZodType, Map<string, JsonSchema>>();

/**
 * A tool's arguments as a caller may send them: its schema's JSON Schema, plus the one rule applied before
 * the schema — strings are trimmed and a blank one counts as absent (src/tools/registry.ts `parseToolArgs`) —
 * so a required string parameter must hold a non-blank character (`pattern: "\\S"`), and an optional one's
 * `minLength: 1` says nothing (a blank value is taken as not sent), as the server reads them.
 */
export function toolArgsSchema(def: ToolDefinition): JsonSchema {
  const cached = ARGS_CACHE.get(def);
  if (cached) return cached;
  const base = jsonSchemaOf(def.schema);
  const required = new Set((base.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries((base.properties as Record<string, JsonSchema> | undefined) ?? {}).map(([name, p]) => [
      name,
      blankIsAbsent(p, name, def)
        ? required.has(name)
          ? { ...p, pattern: p.pattern ?? "\\S" }
          : withoutMinLength1(p)
        : p,
    ]),
  );
  const out = { ...base, properties };
  ARGS_CACHE.set(def, out);
  return out;
}
const ARGS_CACHE = new WeakMap<ToolDefinition, JsonSchema>();

const blankIsAbsent = (p: JsonSchema, name: string, def: ToolDefinition) =>
  p.type === "string" && !def.keepEmpty?.includes(name);

function withoutMinLength1(p: JsonSchema): JsonSchema {
  const { minLength, ...rest } = p;
  return minLength === 1 ? rest : p;
}

/** One tool as a JSON-Schema function definition (the common shape of MCP, OpenAI and AI SDK tools). */
export interface ToolDescriptor {
  name: string;
  description: string;
  parameters: JsonSchema;
}

export function describeTool(def: ToolDefinition, description = def.description): ToolDescriptor {
  return { name: def.name, description, parameters: toolArgsSchema(def) };
}

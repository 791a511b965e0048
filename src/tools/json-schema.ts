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

/** One tool as a JSON-Schema function definition (the common shape of MCP, OpenAI and AI SDK tools). */
export interface ToolDescriptor {
  name: string;
  description: string;
  parameters: JsonSchema;
}

export function describeTool(def: ToolDefinition, description = def.description): ToolDescriptor {
  return { name: def.name, description, parameters: jsonSchemaOf(def.schema) };
}

import type { z } from "zod";

/**
 * Walking the CONFIG zod schema (src/config/schema.ts) by key: which keys it reads, at any path. One
 * walker serves the ignored-key report (src/config/unused-keys.ts), the env-reference pass
 * (src/config/env-refs.ts: is this SecretRef on a key the gateway uses?) and the list of every key the
 * code reads (`schemaKeyPaths`, which test/config/openclaw-carry-over-table.test.ts holds docs/openclaw-carry-over.md to).
 */

type Def = { type: string; [k: string]: unknown };
const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

const WRAPPERS = new Set(["optional", "default", "prefault", "nullable", "readonly", "catch", "nonoptional"]);

/** The schema under its wrappers (optional, default, pipe input, …). */
export function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (let i = 0; i < 20; i++) {
    const def = defOf(s);
    if (WRAPPERS.has(def.type)) s = def.innerType as z.ZodType;
    else if (def.type === "pipe") s = def.in as z.ZodType;
    else break;
  }
  return s;
}

export function schemaType(schema: z.ZodType): string {
  return defOf(unwrap(schema)).type;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The object options of a union (a model reference is a string or `{primary, fallbacks}`). */
function objectOptions(def: Def): z.ZodType[] {
  return (def.options as z.ZodType[]).map(unwrap).filter((o) => defOf(o).type === "object");
}

/** The object option of a union that fits `value`: by its discriminator when it has one, else the first. */
function unionOption(def: Def, value: unknown): z.ZodType | undefined {
  const options = objectOptions(def);
  const disc = def.discriminator as string | undefined;
  if (disc && isObject(value)) {
    return options.find((o) => {
      const lit = unwrap((defOf(o).shape as Record<string, z.ZodType>)[disc]);
      return (defOf(lit).values as unknown[] | undefined)?.includes(value[disc]);
    });
  }
  return options[0];
}

/**
 * The schema of `key` under `schema` (given the value found there, for unions), or undefined when the
 * schema does not read that key. Records read every key; `unknown` values are read whole (not walked).
 */
export function childSchema(schema: z.ZodType, key: string, value?: unknown): z.ZodType | undefined | "opaque" {
  let s = unwrap(schema);
  let def = defOf(s);
  if (def.type === "union") {
    const option = unionOption(def, value);
    if (!option) return undefined;
    s = option;
    def = defOf(s);
  }
  if (def.type === "object") {
    const shape = def.shape as Record<string, z.ZodType>;
    return Object.hasOwn(shape, key) ? shape[key] : undefined;
  }
  if (def.type === "record") return def.valueType as z.ZodType;
  if (def.type === "array") return /^\d+$/.test(key) ? (def.element as z.ZodType) : undefined;
  if (def.type === "unknown" || def.type === "any") return "opaque";
  return undefined;
}

/** Whether the schema reads the key at `path` (array indexes and record keys as they appear in a document). */
export function schemaReads(schema: z.ZodType, path: readonly string[]): boolean {
  let s: z.ZodType = schema;
  for (const key of path) {
    const next = childSchema(s, key);
    if (next === undefined) return false;
    if (next === "opaque") return true;
    s = next;
  }
  return true;
}

/**
 * Every key path the schema reads, `*` for a record's keys and `[]` for an array's items
 * (`agents.entries.*.model`, `session.sendPolicy.rules[].action`). Objects are listed with their keys.
 */
export function schemaKeyPaths(schema: z.ZodType): string[] {
  const out: string[] = [];
  const walk = (s: z.ZodType, path: string): void => {
    const def = defOf(unwrap(s));
    if (def.type === "object") {
      for (const [k, v] of Object.entries(def.shape as Record<string, z.ZodType>)) {
        const p = path ? `${path}.${k}` : k;
        out.push(p);
        walk(v, p);
      }
    } else if (def.type === "record") walk(def.valueType as z.ZodType, `${path}.*`);
    else if (def.type === "array") walk(def.element as z.ZodType, `${path}[]`);
    else if (def.type === "union") for (const o of objectOptions(def)) walk(o, path);
  };
  walk(schema, "");
  return [...new Set(out)];
}

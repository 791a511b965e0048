import type { z } from "zod";

/**
 * Keys of a CONFIG document that the schema does not know. OpenClaw configs carry many settings a
 * session gateway has no use for (workspaces, channel credentials, TTS…); they are tolerated, and
 * listed so an operator sees what did not carry over instead of guessing.
 */

/** The report is bounded: a config with thousands of unknown keys still yields a short warning list. */
export const MAX_UNUSED_KEYS = 50;

type Def = { type: string; [k: string]: unknown };
const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

const WRAPPERS = new Set(["optional", "default", "prefault", "nullable", "readonly", "catch", "nonoptional"]);

function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (let i = 0; i < 20; i++) {
    const def = defOf(s);
    if (WRAPPERS.has(def.type)) s = def.innerType as z.ZodType;
    else if (def.type === "pipe") s = def.in as z.ZodType;
    else break;
  }
  return s;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The object option of a union that fits `value` (its discriminator value, else the first object option). */
function unionOption(def: Def, value: Record<string, unknown>): z.ZodType | undefined {
  const options = (def.options as z.ZodType[]).map(unwrap).filter((o) => defOf(o).type === "object");
  const disc = def.discriminator as string | undefined;
  if (disc) {
    return options.find((o) => {
      const lit = unwrap((defOf(o).shape as Record<string, z.ZodType>)[disc]);
      return (defOf(lit).values as unknown[] | undefined)?.includes(value[disc]);
    });
  }
  return options[0];
}

export function unusedKeys(doc: unknown, schema: z.ZodType): string[] {
  const found: string[] = [];
  let extra = 0;
  const walk = (value: unknown, s: z.ZodType, path: string): void => {
    const def = defOf(unwrap(s));
    if (def.type === "object" && isObject(value)) {
      const shape = def.shape as Record<string, z.ZodType>;
      for (const [k, v] of Object.entries(value)) {
        const p = path ? `${path}.${k}` : k;
        if (Object.hasOwn(shape, k)) walk(v, shape[k], p);
        else if (found.length < MAX_UNUSED_KEYS) found.push(p);
        else extra++;
      }
    } else if (def.type === "record" && isObject(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, def.valueType as z.ZodType, `${path}.${k}`);
    } else if (def.type === "array" && Array.isArray(value)) {
      for (const [i, v] of value.entries()) walk(v, def.element as z.ZodType, `${path}.${i}`);
    } else if (def.type === "union" && isObject(value)) {
      const option = unionOption(def, value);
      if (option) walk(value, option, path);
    }
  };
  walk(doc, schema, "");
  const out = found.map((p) => `${p}: ignored (not used by Switchboard)`);
  if (extra > 0) out.push(`… and ${extra} more ignored keys`);
  return out;
}

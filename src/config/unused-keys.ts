import type { z } from "zod";
import { childSchema } from "./schema-walk";

/**
 * Keys of a CONFIG document that the schema does not read. OpenClaw configs carry many settings a
 * session gateway has no use for (workspaces, channel credentials, gateway, hooks, skills, memory…); they
 * are tolerated, and every one is named so an operator sees what did not carry over instead of guessing.
 *
 * Grouped, never cut: one warning per object holding ignored keys, naming all of them
 * (`channels.telegram.{botToken, dmPolicy}: ignored (not used by Switchboard)`). An ignored key's own
 * contents are not listed (the whole `gateway` block is one name), so the report grows with the objects
 * the gateway reads, never with the size of what it ignores.
 */

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export const IGNORED = "ignored (not used by Switchboard)";

export function unusedKeys(doc: unknown, schema: z.ZodType): string[] {
  const groups = new Map<string, string[]>();
  const walk = (value: unknown, s: z.ZodType, path: string): void => {
    if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) {
        const child = childSchema(s, k, value);
        if (child === undefined) {
          const list = groups.get(path) ?? [];
          list.push(k);
          groups.set(path, list);
        } else if (child !== "opaque") walk(v, child, path ? `${path}.${k}` : k);
      }
    } else if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) {
        const child = childSchema(s, String(i), v);
        if (child && child !== "opaque") walk(v, child, `${path}.${i}`);
      }
    }
  };
  walk(doc, schema, "");
  return [...groups].map(([path, keys]) => {
    const names = keys.length === 1 ? keys[0] : `{${keys.join(", ")}}`;
    return `${path ? `${path}.` : ""}${names}: ${IGNORED}`;
  });
}

/**
 * Environment references in a CONFIG document, resolved before it is validated, as OpenClaw resolves
 * them when it reads its config (docs/openclaw-carry-over.md, "Secrets and ${VAR}"):
 *
 * - `${NAME}` in any string value (URLs, secrets, inline: `"${BASE}/v1"`); names are `[A-Z_][A-Z0-9_]*`,
 *   `$${NAME}` is a literal `${NAME}`. A variable that is not set (or empty) leaves the text as written and
 *   becomes a warning: the feature using that value is unavailable, the gateway still starts.
 * - SecretRef objects `{source, provider, id}`: `source: "env"` becomes the variable's value; `file`,
 *   `exec` and `store` need a resolver process this gateway does not run, so such a value is removed
 *   with a warning (the feature is then unconfigured, never given the object as a string).
 *
 * The environment is the Worker's bindings (secrets and vars), then the config's own `env.vars`
 * (OpenClaw applies those only where the process environment lacks the name). Keys are never substituted.
 */

type Doc = Record<string, unknown>;

/** Where a variable's value comes from: the Worker's environment first, then CONFIG's `env.vars`. */
export type EnvLookup = (name: string) => string | undefined;

const isObject = (v: unknown): v is Doc => typeof v === "object" && v !== null && !Array.isArray(v);

/** An env lookup over the Worker's bindings (string values only) and CONFIG's `env.vars`. */
export function envLookupOf(bindings: object, doc: Doc): EnvLookup {
  const vars = isObject(doc.env) && isObject(doc.env.vars) ? doc.env.vars : {};
  const env = bindings as Record<string, unknown>;
  return (name) => {
    const fromEnv = env[name];
    if (typeof fromEnv === "string" && fromEnv !== "") return fromEnv;
    const fromVars = vars[name];
    return typeof fromVars === "string" && fromVars !== "" ? fromVars : undefined;
  };
}

/** OpenClaw's SecretRef: exactly these three keys. */
export interface SecretRef {
  source: "env" | "file" | "exec" | "store";
  provider: string;
  id: string;
}

export function isSecretRef(v: unknown): v is SecretRef {
  if (!isObject(v)) return false;
  const keys = Object.keys(v);
  return (
    keys.length === 3 &&
    typeof v.provider === "string" &&
    typeof v.id === "string" &&
    (v.source === "env" || v.source === "file" || v.source === "exec" || v.source === "store")
  );
}

const VAR = /(\$?)\$\{([A-Z_][A-Z0-9_]*)\}/g;

/** Largest number of values visited: CONFIG is one Worker variable, but the walk is bounded anyway. */
const MAX_VALUES = 100_000;

export interface EnvRefsResult {
  warnings: string[];
  /** Values read from the environment into the document (remembered as secrets for the logs). */
  resolved: string[];
}

/**
 * Resolve every `${VAR}` and SecretRef of `doc` in place. `isRead(path)` says whether the gateway reads
 * the key at `path`: a SecretRef it cannot resolve is only worth a warning there (elsewhere the key is
 * reported as ignored anyway, src/config/unused-keys.ts).
 */
export function resolveEnvRefs(doc: Doc, lookup: EnvLookup, isRead: (path: string[]) => boolean): EnvRefsResult {
  const out: EnvRefsResult = { warnings: [], resolved: [] };
  let visited = 0;
  const substitute = (s: string, path: string[]): string => {
    if (!s.includes("${")) return s;
    return s.replace(VAR, (whole, escaped: string, name: string) => {
      if (escaped) return whole.slice(1); // `$${NAME}` is the literal text `${NAME}`
      const value = lookup(name);
      if (value === undefined) {
        // Only where the gateway reads the value: an ignored key is reported as ignored already.
        if (isRead(path))
          out.warnings.push(
            `${path.join(".")}: env var "${name}" is not set; the value keeps "\${${name}}" and the feature using it is unavailable`,
          );
        return whole;
      }
      out.resolved.push(value);
      return value;
    });
  };
  const walk = (node: Doc | unknown[], path: string[]): void => {
    const entries: [string | number, unknown][] = Array.isArray(node) ? [...node.entries()] : Object.entries(node);
    for (const [k, v] of entries) {
      if (++visited > MAX_VALUES) return;
      const at = [...path, String(k)];
      const set = (value: unknown) => {
        if (Array.isArray(node)) node[k as number] = value;
        else if (value === undefined) delete node[k as string];
        else node[k as string] = value;
      };
      if (typeof v === "string") set(substitute(v, at));
      else if (isSecretRef(v)) set(secretRefValue(v, at, lookup, isRead, out));
      else if (isObject(v) || Array.isArray(v)) walk(v, at);
    }
  };
  walk(doc, []);
  return out;
}

function secretRefValue(
  ref: SecretRef,
  path: string[],
  lookup: EnvLookup,
  isRead: (path: string[]) => boolean,
  out: EnvRefsResult,
): string | SecretRef | undefined {
  const read = isRead(path);
  if (ref.source === "env") {
    const value = lookup(ref.id);
    if (value !== undefined) {
      out.resolved.push(value);
      return value;
    }
    if (read) out.warnings.push(`${path.join(".")}: SecretRef env var "${ref.id}" is not set; the value is unset`);
    return read ? undefined : ref;
  }
  if (!read) return ref;
  out.warnings.push(
    `${path.join(".")}: SecretRef source "${ref.source}" is not supported (only "env": store the value as a Worker secret and use {source: "env", provider: "default", id: "<NAME>"}); the value is unset`,
  );
  return undefined;
}

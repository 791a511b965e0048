import { Validator } from "@cfworker/json-schema";
import fc from "fast-check";

/**
 * fast-check arbitraries derived from the JSON Schemas of /openapi.json (test/http/openapi-requests.test.ts):
 * `valueOf(schema)` generates values the schema accepts, `violationsOf(schema)` values that break each of its
 * documented constraints (pattern, maxLength, minimum, enum, required, additionalProperties, minProperties,
 * oneOf, type). Both are bounded (short strings, at most three array items, nesting cut at depth 4) and both
 * are checked by an independent validator (@cfworker/json-schema, as test/helpers/contract.ts checks answers):
 * a generated value the schema would not accept, or a "violation" it would, is dropped, so the test sends
 * exactly what the document says is valid or invalid. Covers the subset the document uses: $ref, const, enum,
 * anyOf, oneOf, type (or a list of types), string bounds and pattern, number bounds, items and item counts,
 * properties, required, additionalProperties, propertyNames, minProperties.
 */

export type Schema = Record<string, any>;
/** Values breaking one documented constraint: `at` the field path (`.args.limit`), `what` the constraint. */
export type Violation = { at: string; what: string; arb: fc.Arbitrary<unknown> };
type Components = Record<string, Schema>;

/** What a generator gives when its candidate did not hold (filtered out by the caller, never retried). */
export const SKIP = Symbol("skip");

const MAX_DEPTH = 4;
/** Longest string generated where the schema allows longer: bounds are probed by violations, not by size. */
const MAX_STRING = 24;

/** A compiled validator per schema object, with the document's components beside it so `$ref`s resolve. */
export class SchemaSet {
  private readonly validators = new WeakMap<object, Validator>();
  constructor(readonly components: Components) {}

  resolve(schema: Schema): Schema {
    let s = schema;
    while (typeof s.$ref === "string") s = this.components[s.$ref.replace("#/components/schemas/", "")] ?? {};
    return s;
  }

  accepts(schema: Schema, value: unknown): boolean {
    let v = this.validators.get(schema);
    if (!v) {
      v = new Validator({ ...schema, components: { schemas: this.components } } as never, "2020-12", false);
      this.validators.set(schema, v);
    }
    return v.validate(value).valid;
  }

  /** Values `schema` accepts (from its branch `from`, when given); SKIP where one turned out not to be. */
  valueOf(schema: Schema, from: Schema = schema): fc.Arbitrary<unknown> {
    return this.raw(from, 0).map((v) => (this.accepts(schema, v) ? v : SKIP));
  }

  /** The branches of a union (each generated on its own, so every variant is exercised), else the schema. */
  branchesOf(schema: Schema): Schema[] {
    const s = this.resolve(schema);
    return s.oneOf?.every((b: Schema) => b.type || b.$ref) ? s.oneOf : (s.anyOf ?? [schema]);
  }

  /**
   * One entry per documented constraint of `schema` (where it sits, which constraint) with values that break
   * it and nothing else; SKIP where a value turned out to be accepted after all.
   */
  violationsOf(schema: Schema, at = ""): Violation[] {
    return this.breaking(schema, 0, at).map((v) => ({
      ...v,
      arb: v.arb.map((x) => (x === SKIP || this.accepts(schema, x) ? SKIP : x)),
    }));
  }

  private raw(schema: Schema, depth: number): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    if ("const" in s) return fc.constant(s.const);
    if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
    const branches = s.anyOf ?? (s.oneOf?.every((b: Schema) => b.type || b.$ref || b.const) ? s.oneOf : undefined);
    if (branches) return fc.oneof(...branches.map((b: Schema) => this.raw(b, depth)));
    const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.length > 1) return fc.oneof(...types.map((type) => this.raw({ ...s, type }, depth)));
    switch (types[0]) {
      case "string":
        return stringOf(s);
      case "integer":
        return fc.integer({
          min: s.minimum ?? -1000,
          max: Math.min(s.maximum ?? (s.minimum ?? 0) + 100_000, Number.MAX_SAFE_INTEGER),
        });
      case "number":
        return fc.oneof(
          fc.integer({ min: Math.ceil(s.minimum ?? -1000), max: Math.floor(s.maximum ?? (s.minimum ?? 0) + 100_000) }),
          fc.double({ min: s.minimum ?? -1000, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true }),
        );
      case "boolean":
        return fc.boolean();
      case "null":
        return fc.constant(null);
      case "array":
        return fc.array(this.raw(s.items ?? {}, depth + 1), {
          minLength: s.minItems ?? 0,
          maxLength: Math.max(s.minItems ?? 0, Math.min(s.maxItems ?? 3, 3)),
        });
      case "object":
        return this.objectOf(s, depth);
      default:
        return anyJson(depth);
    }
  }

  private objectOf(s: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
    const props: Record<string, Schema> = depth >= MAX_DEPTH ? {} : (s.properties ?? {});
    const required = new Set<string>(s.required ?? []);
    // oneOf of `required` lists (exactly one of these fields): one branch's fields become required.
    const exclusive: string[][] = (s.oneOf ?? [])
      .filter((b: Schema) => b.required && !b.type)
      .map((b: Schema) => b.required);
    const pick = exclusive.length ? fc.constantFrom(...exclusive) : fc.constant([] as string[]);
    return pick.chain((chosen) => {
      const others = new Set(exclusive.flat().filter((k) => !chosen.includes(k)));
      const keys = Object.keys(props).filter((k) => !others.has(k));
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const k of keys) model[k] = this.raw(props[k], depth + 1);
      const requiredKeys = keys.filter((k) => required.has(k) || chosen.includes(k));
      // Often only what is required (for an object without required fields: `{}`), where a server most often
      // demands more than its document says.
      const minimal = fc.record(Object.fromEntries(requiredKeys.map((k) => [k, model[k]])));
      const known = fc.oneof(
        { arbitrary: fc.record(model, { requiredKeys }), weight: 3 },
        { arbitrary: minimal, weight: 1 },
      );
      // A schema that takes other properties (a record) gets a few of its own.
      const extra = s.additionalProperties && typeof s.additionalProperties === "object" && !Object.keys(props).length;
      const base = extra
        ? fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), this.raw(s.additionalProperties, depth + 1), {
            maxKeys: depth >= MAX_DEPTH ? 0 : 3,
          })
        : known;
      return base as fc.Arbitrary<Record<string, unknown>>;
    });
  }

  private breaking(schema: Schema, depth: number, at: string): Violation[] {
    const s = this.resolve(schema);
    if (depth > MAX_DEPTH) return [];
    const out: Violation[] = [];
    const add = (what: string, arb: fc.Arbitrary<unknown>) => out.push({ at, what, arb });
    if ("const" in s || Array.isArray(s.enum)) add("const/enum", fc.constantFrom("not-documented", 12345, null));
    if (s.anyOf || (s.oneOf && !s.type)) {
      // A value no branch takes; a value of a branch that breaks it (the union as a whole then refuses it).
      add("no branch", fc.constantFrom<unknown>("x", 3.5, [], true));
      for (const b of s.anyOf ?? s.oneOf) out.push(...this.breaking(b, depth + 1, branchName(at, this.resolve(b))));
    }
    const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.length && !types.includes("null")) add("type (null)", fc.constant(null));
    if (types.length && !types.includes("number") && !types.includes("integer")) add("type (number)", fc.constant(7));
    else if (types.length && !types.includes("string")) add("type (string)", fc.constant("7"));
    if (types.includes("string")) {
      if (s.maxLength !== undefined) add("maxLength", fc.constant("a".repeat(s.maxLength + 1)));
      if (s.minLength) add("minLength", fc.constant("a".repeat(s.minLength - 1)));
      if (s.pattern) add("pattern", notMatching(s.pattern));
    }
    if (types.includes("integer") || types.includes("number")) {
      if (s.minimum !== undefined) add("minimum", fc.constant(s.minimum - 1));
      if (s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER) add("maximum", fc.constant(s.maximum + 1));
      if (types.includes("integer") && !types.includes("number")) add("integer", fc.constant((s.minimum ?? 0) + 0.5));
    }
    if (types.includes("object") && depth < MAX_DEPTH) out.push(...this.breakingObject(s, depth, at));
    return out;
  }

  private breakingObject(s: Schema, depth: number, at: string): Violation[] {
    const valid = this.objectOf(s, depth);
    const props: Record<string, Schema> = s.properties ?? {};
    const out: Violation[] = [];
    const add = (what: string, arb: fc.Arbitrary<unknown>) => out.push({ at, what, arb });
    for (const k of s.required ?? [])
      add(
        `required ${k}`,
        valid.map(({ [k]: _gone, ...rest }) => rest),
      );
    if (s.additionalProperties === false)
      add(
        "additionalProperties",
        fc
          .tuple(valid, fc.stringMatching(/^[a-z][a-zA-Z]{2,10}$/))
          .map(([o, name]) => (name in props ? SKIP : { ...o, [name]: 1 })),
      );
    if (s.minProperties) add("minProperties", fc.constant({}));
    const exclusive: string[][] = (s.oneOf ?? [])
      .filter((b: Schema) => b.required && !b.type)
      .map((b: Schema) => b.required);
    if (exclusive.length > 1) {
      // Every exclusive field present (more than one branch matches), and none of them (no branch matches).
      const fields = [...new Set(exclusive.flat())];
      add(
        "oneOf (all)",
        fc
          .tuple(valid, ...fields.map((k) => this.raw(props[k] ?? {}, depth + 1)))
          .map(([o, ...vs]) => ({ ...o, ...Object.fromEntries(fields.map((k, i) => [k, vs[i]])) })),
      );
      add(
        "oneOf (none)",
        valid.map((o) => Object.fromEntries(Object.entries(o).filter(([k]) => !fields.includes(k)))),
      );
    }
    for (const [k, p] of Object.entries(props))
      for (const bad of this.breaking(p, depth + 1, `${at}.${k}`))
        out.push({ ...bad, arb: fc.tuple(valid, bad.arb).map(([o, v]) => (v === SKIP ? SKIP : { ...o, [k]: v })) });
    return out;
  }
}

/** Where a union's branch is: its title or its discriminating `const` (the /tools/invoke variant's tool). */
function branchName(at: string, b: Schema): string {
  const tool = b.properties?.tool?.const;
  return `${at}[${b.title ?? tool ?? "branch"}]`;
}

/** Strings of a string schema: from its pattern when it has one (lookaheads are checked by the filter). */
function stringOf(s: Schema): fc.Arbitrary<string> {
  const maxLength = Math.max(s.minLength ?? 0, Math.min(s.maxLength ?? MAX_STRING, MAX_STRING));
  if (!s.pattern) return fc.string({ minLength: s.minLength ?? 0, maxLength, unit: "grapheme" });
  const full = new RegExp(s.pattern, "u");
  return fc
    .stringMatching(new RegExp(withoutLookaheads(s.pattern)), { maxLength: s.maxLength ?? 200 })
    .filter((v) => full.test(v) && v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? Infinity));
}

/** Strings a pattern refuses: near misses built from its own matches, and strings of any characters. */
function notMatching(pattern: string): fc.Arbitrary<string> {
  const full = new RegExp(pattern, "u");
  const near = fc
    .tuple(
      fc.stringMatching(new RegExp(withoutLookaheads(pattern)), { maxLength: 60 }),
      fc.constantFrom(":", " ", "é", "/", "", "::"),
      fc.nat(),
    )
    .map(([v, junk, at]) => {
      const i = v.length ? at % (v.length + 1) : 0;
      return `${v.slice(0, i)}${junk}${v.slice(i)}`;
    });
  return fc
    .oneof(near, fc.string({ maxLength: 20, unit: "grapheme" }), fc.constantFrom("", " ", "\t \n"))
    .map((v) => (full.test(v) ? "" : v));
}

/** A pattern with its `(?!…)` and `(?=…)` groups removed: what fast-check's stringMatching can generate from. */
export function withoutLookaheads(pattern: string): string {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === "\\") {
      out += pattern.slice(i, i + 2);
      i++;
    } else if (pattern.startsWith("(?!", i) || pattern.startsWith("(?=", i)) {
      let depth = 0;
      for (; i < pattern.length; i++) {
        if (pattern[i] === "\\") i++;
        else if (pattern[i] === "(") depth++;
        else if (pattern[i] === ")" && --depth === 0) break;
      }
    } else out += pattern[i];
  }
  return out;
}

function anyJson(depth: number): fc.Arbitrary<unknown> {
  return depth >= MAX_DEPTH
    ? fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null))
    : fc.jsonValue({ maxDepth: 2 });
}

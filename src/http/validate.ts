import type { Context, ValidationTargets } from "hono";
import { HTTPException } from "hono/http-exception";
import { validator } from "hono-openapi";
import { z } from "zod";
import { invalid, SwitchboardError } from "../errors";
import { issueField, issueText, type ValidationIssue } from "../zod-issue-text";
import { markQueryNames } from "./strict-query";

/**
 * Request validation through Hono's validator middleware (hono-openapi's `validator`, which also puts
 * the schema into /openapi.json). A failure is our envelope, a 400 whose message starts with the field:
 * `limit: must be >= 1` (test/http/bad-input.test.ts, test/http/input-bounds.test.ts).
 */
export function valid<T extends keyof ValidationTargets, S extends z.ZodType>(target: T, schema: S) {
  const middleware = validator(target, schema, (result, c) => {
    if (result.success) return;
    if (target === "json" && !isJsonRequest(c))
      throw invalid("Request body must be valid JSON (send it with Content-Type: application/json)");
    throw invalid(requestIssueText(result.error[0], target === "json" ? "body" : target));
  });
  // The query's names are the schema's: any other is refused before this runs (src/http/strict-query.ts).
  return target === "query" && schema instanceof z.ZodObject
    ? markQueryNames(middleware, Object.keys(schema.shape))
    : middleware;
}

function isJsonRequest(c: Context): boolean {
  return /^application\/([\w.-]+\+)?json$/i.test((c.req.header("Content-Type") ?? "").split(";")[0].trim());
}

/** `<field path>: <message>`; an issue about the whole body of a JSON request says what the body must be. */
function requestIssueText(issue: ValidationIssue & { code?: string; keys?: string[] }, whole: string): string {
  if (!issue.path?.length && whole === "body" && /expected object/.test(issue.message))
    return "Request body must be a JSON object";
  // A closed body names every field it does not take, as tool arguments do (src/tools/registry.ts).
  if (issue.code === "unrecognized_keys" && issue.keys?.length)
    return `${issue.keys.map((k) => (issue.path?.length ? `${issueField(issue, "")}.${k}` : k)).join(", ")}: unknown field${issue.keys.length > 1 ? "s" : ""}`;
  return issueText(issue, whole);
}

/** Hono's validator throws this when a JSON body does not parse; it becomes our envelope (app.ts onError). */
export function fromHttpException(err: unknown): SwitchboardError | undefined {
  if (!(err instanceof HTTPException)) return undefined;
  if (err.status === 400 && /Malformed JSON/i.test(err.message)) return invalid("Request body must be valid JSON");
  return new SwitchboardError(err.status === 400 ? "invalid_request" : "internal_error", err.message);
}

/**
 * An integer query parameter. Query values are strings: `""` or absent means `def`, anything but an
 * integer is a 400, below `min` is a 400, above `max` is clamped (documented per parameter, docs/limits.md).
 */
export function intQuery<D extends number | undefined = undefined>(opts: {
  min: number;
  max: number;
  def?: D;
  description: string;
}) {
  return (
    z
      .string()
      .regex(/^-?\d+$/, "expected an integer")
      .or(z.literal(""))
      .optional()
      .transform((v, ctx): D extends number ? number : number | undefined => {
        if (v === undefined || v === "") return opts.def as D extends number ? number : undefined;
        const n = Number(v);
        if (n < opts.min) {
          ctx.addIssue({ code: "custom", message: `must be >= ${opts.min}` });
          return z.NEVER;
        }
        return Math.min(n, opts.max) as D extends number ? number : number | undefined;
      })
      // Query values arrive as strings; the document shows the integer they spell (the string union is dropped).
      .meta({
        type: "integer",
        minimum: opts.min,
        anyOf: undefined,
        description: `${opts.description}. An integer >= ${opts.min}; larger than ${opts.max} counts as ${opts.max}${opts.def !== undefined ? `; default ${opts.def}` : ""}.`,
      })
  );
}

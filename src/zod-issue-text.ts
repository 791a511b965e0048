/**
 * The one way a validation failure is put into words: `<field path>: <message>`, the field path
 * dotted (`agents.entries.main.model`) and, for an issue about the whole input, the name the caller gives it
 * ("body", "query", "args", "(root)"). Used by request validation (src/http/validate.ts), tool
 * arguments (src/tools/registry.ts), webhook-runtime completions and CONFIG (test/http/bad-input.test.ts,
 * test/config/config.test.ts).
 */

/** A zod or Standard Schema issue: Standard Schema path segments may be `{ key }` objects. */
export type ValidationIssue = { message: string; path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> };

/** CONFIG errors list at most this many issues, so one bad array cannot make an unbounded message. */
const MAX_LISTED_ISSUES = 5;

/** The dotted path of an issue, or `whole` when it concerns the whole input. */
export function issueField(issue: ValidationIssue, whole: string): string {
  const path = (issue.path ?? []).map((p) => String(typeof p === "object" ? p.key : p));
  return path.join(".") || whole;
}

/** `<field>: <message>` for one issue. */
export function issueText(issue: ValidationIssue, whole: string): string {
  return `${issueField(issue, whole)}: ${issue.message}`;
}

/** The first few issues, each as `issueText`, joined by "; ". */
export function issuesText(issues: readonly ValidationIssue[], whole: string): string {
  return issues
    .slice(0, MAX_LISTED_ISSUES)
    .map((i) => issueText(i, whole))
    .join("; ");
}

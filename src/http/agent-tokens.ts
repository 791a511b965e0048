import { AGENT_ID_RE } from "../config/schema";
import { SwitchboardError } from "../errors";

/**
 * `AGENT_TOKENS` (secret, JSON `{"<agentId>": "<token>"}`): least-privilege tokens, one per agent.
 * A malformed value fails closed — every authenticated request answers a 500 config error naming
 * AGENT_TOKENS — instead of silently dropping entries or accepting a guessable token such as "a".
 */
export const MIN_AGENT_TOKEN_CHARS = 16;
const MAX_AGENT_TOKEN_CHARS = 4096;

let cache: { raw: unknown; result: Record<string, string> | SwitchboardError } | undefined;

export function agentTokensOf(env: Pick<Env, "AGENT_TOKENS">): Record<string, string> {
  const raw = env.AGENT_TOKENS;
  if (!cache || cache.raw !== raw) cache = { raw, result: parseAgentTokens(raw) };
  if (cache.result instanceof SwitchboardError) throw cache.result;
  return cache.result;
}

const problem = (why: string) =>
  new SwitchboardError(
    "config_error",
    `Invalid AGENT_TOKENS: ${why} (expected a JSON object {"<agentId>": "<token of at least ${MIN_AGENT_TOKEN_CHARS} characters>"})`,
  );

export function parseAgentTokens(raw: unknown): Record<string, string> | SwitchboardError {
  if (raw === undefined || raw === null || raw === "") return {};
  let doc: unknown = raw;
  if (typeof raw === "string") {
    try {
      doc = JSON.parse(raw);
    } catch {
      return problem("not valid JSON");
    }
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return problem("not a JSON object");
  const out: Record<string, string> = {};
  for (const [rawId, token] of Object.entries(doc as Record<string, unknown>)) {
    const agentId = rawId.trim().toLowerCase();
    if (!AGENT_ID_RE.test(agentId))
      return problem(`agent id ${JSON.stringify(rawId.slice(0, 80))} must match [a-z0-9][a-z0-9_-]{0,63}`);
    if (typeof token !== "string") return problem(`the token of "${agentId}" is not a string`);
    // Whitespace cannot travel in a bearer header; a token with it could never be presented.
    if (token.length < MIN_AGENT_TOKEN_CHARS || token.length > MAX_AGENT_TOKEN_CHARS || /\s/.test(token)) {
      return problem(
        `the token of "${agentId}" must be ${MIN_AGENT_TOKEN_CHARS}–${MAX_AGENT_TOKEN_CHARS} characters without whitespace`,
      );
    }
    if (Object.hasOwn(out, agentId)) return problem(`agent id "${agentId}" appears twice`);
    out[agentId] = token;
  }
  return out;
}

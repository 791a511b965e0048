import { SwitchboardError } from "../errors";
import { parseAgentTokens } from "../http/agent-tokens";
import { parseConfig } from "./load";

/**
 * The Worker's secrets are checked before anything is served (src/http/app.ts, next to CONFIG): a deploy
 * that kept an example value or a short key would mint forgeable run tokens (SIGNING_SECRET) or hand the
 * operator's powers to anyone who read our docs (GATEWAY_TOKEN). Such a deploy fails closed — every request
 * answers a 500 `config_error` naming the secret, as a malformed AGENT_TOKENS does — instead of running
 * (docs/deploy.md, "Secrets").
 */

/** Fewer characters than this cannot be a random key of 128 bits or more in any usual encoding. */
export const MIN_SECRET_CHARS = 32;

/**
 * Every value this repository shows as an example of a secret — today's `.dev.vars.example`, the ones it
 * held before, and the test bindings of earlier versions — so a copy-paste is refused even when it is long
 * enough. test/config/secrets.test.ts checks that every value in `.dev.vars.example` and in the docs is listed.
 */
export const EXAMPLE_SECRETS: ReadonlySet<string> = new Set([
  "replace-with-the-output-of-openssl-rand-base64-32",
  "replace-with-another-output-of-openssl-rand-base64-32",
  "replace-with-a-third-output-of-openssl-rand-base64-32",
  "operator token, 16-4096 characters",
  "an agent token, 16-4096 characters",
  "HMAC key for run tokens",
  "test-gateway-token",
  "test-main-agent-token",
  "test-research-token",
  "test-signing-secret",
]);

type SecretBindings = Pick<Env, "GATEWAY_TOKEN" | "SIGNING_SECRET" | "AGENT_TOKENS" | "CONFIG">;

let cache: { raw: unknown[]; result: SwitchboardError | null } | undefined;

/** Throws the config error of the first refused secret; checked once per isolate per set of values. */
export function assertSecrets(env: SecretBindings): void {
  const raw = [env.GATEWAY_TOKEN, env.SIGNING_SECRET, env.AGENT_TOKENS, env.CONFIG];
  if (!cache || raw.some((v, i) => v !== cache?.raw[i])) cache = { raw, result: secretsProblem(env) };
  if (cache.result) throw cache.result;
}

function weakness(value: string): string | null {
  if (EXAMPLE_SECRETS.has(value)) return "it is an example value from this repository's docs";
  if (value.length < MIN_SECRET_CHARS) return `it has ${value.length} characters, fewer than ${MIN_SECRET_CHARS}`;
  return null;
}

const refuse = (name: string, why: string) =>
  new SwitchboardError(
    "config_error",
    `Invalid ${name}: ${why}. Set a random value of at least ${MIN_SECRET_CHARS} characters: openssl rand -base64 32 | npx wrangler secret put ${name} (docs/deploy.md)`,
  );

export function secretsProblem(env: SecretBindings): SwitchboardError | null {
  // Unset (or empty) is not refused here: without GATEWAY_TOKEN there is no operator, without
  // SIGNING_SECRET no run token is minted or accepted (webhook runs then fail, saying so).
  for (const name of ["GATEWAY_TOKEN", "SIGNING_SECRET"] as const) {
    const value = env[name];
    if (typeof value !== "string" || value === "") continue;
    const why = weakness(value);
    if (why) return refuse(name, why);
  }
  const tokens = parseAgentTokens(env.AGENT_TOKENS);
  if (tokens instanceof SwitchboardError) return tokens;
  // Checked against the CONFIG binding: the secrets and CONFIG are what the deployment was given together
  // (tests swap the document the routes read with setConfigOverride, never the bindings).
  const cfg = parseConfig(env.CONFIG);
  const known = cfg instanceof SwitchboardError ? null : new Set(cfg.agents.roster.map((a) => a.id));
  for (const [agentId, token] of Object.entries(tokens)) {
    if (known && !known.has(agentId))
      return new SwitchboardError(
        "config_error",
        `Invalid AGENT_TOKENS: agent "${agentId}" is not in CONFIG agents.entries (${[...known].join(", ")}); a token for it could never act as it`,
      );
    if (EXAMPLE_SECRETS.has(token))
      return new SwitchboardError(
        "config_error",
        `Invalid AGENT_TOKENS: the token of "${agentId}" is an example value from this repository's docs; set a random one (docs/deploy.md)`,
      );
  }
  return null;
}

/// <reference types="vite/client" />
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import devVarsExample from "../../.dev.vars.example?raw";
import deployDoc from "../../docs/deploy.md?raw";
import readme from "../../README.md?raw";
import { EXAMPLE_SECRETS, MIN_SECRET_CHARS } from "../../src/config/secrets";
import worker from "../../src/index";
import { GATEWAY } from "../helpers/http";

/**
 * Placeholder and weak secrets are refused (src/config/secrets.ts, docs/deploy.md "Secrets"): a deploy
 * that kept an example value, or a key shorter than 32 characters, answers every request — public ones
 * included — with a 500 config_error naming the secret, so it can never run with forgeable run tokens.
 */

async function fetchWith(bindings: Partial<Env>, path = "/v1/agents", token: string | null = GATEWAY) {
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`https://switchboard.test${path}`, { headers: token ? { Authorization: `Bearer ${token}` } : {} }),
    { ...env, ...bindings } as Env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: (await res.json()) as any };
}

/** `NAME="value"` / `NAME='value'` assignments of the three secrets in a text, and the agent tokens inside AGENT_TOKENS. */
function secretsShownIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/\b(GATEWAY_TOKEN|SIGNING_SECRET|AGENT_TOKENS)=(["'])(.*?)\2/g)) {
    if (m[1] === "AGENT_TOKENS") out.push(...(Object.values(JSON.parse(m[3])) as string[]));
    else out.push(m[3]);
  }
  return out;
}

const strong = () => crypto.randomUUID() + crypto.randomUUID();

describe("refused secrets", () => {
  it("every secret value the repository shows as an example is on the refused list", () => {
    const shown = [devVarsExample, readme, deployDoc].flatMap(secretsShownIn);
    expect(shown.length).toBeGreaterThanOrEqual(3); // the example file's three secrets at least
    for (const value of shown) expect(EXAMPLE_SECRETS.has(value), value).toBe(true);
  });

  for (const name of ["GATEWAY_TOKEN", "SIGNING_SECRET"] as const) {
    it(`${name}: each example value, and a value of ${MIN_SECRET_CHARS - 1} characters, answer every request 500 config_error naming it`, async () => {
      const short = "x".repeat(MIN_SECRET_CHARS - 1);
      for (const value of [...EXAMPLE_SECRETS, short]) {
        // The operator token itself is the refused value when GATEWAY_TOKEN is under test: still refused.
        const token = name === "GATEWAY_TOKEN" ? value : GATEWAY;
        for (const path of ["/v1/agents", "/healthz", "/tools/invoke"]) {
          const r = await fetchWith({ [name]: value }, path, token);
          expect(r.status, `${name}=${value} on ${path}`).toBe(500);
          expect(r.json).toEqual({ ok: false, error: { type: "config_error", message: expect.any(String) } });
          expect(r.json.error.message).toMatch(new RegExp(`^Invalid ${name}: `));
          expect(r.json.error.message).toContain(`wrangler secret put ${name}`);
          // The refusal names the secret, never its value.
          expect(r.json.error.message).not.toContain(value);
        }
      }
      const why = async (value: string) => (await fetchWith({ [name]: value })).json.error.message;
      expect(await why(short)).toContain(`it has ${MIN_SECRET_CHARS - 1} characters, fewer than ${MIN_SECRET_CHARS}`);
      expect(await why("replace-with-the-output-of-openssl-rand-base64-32")).toContain("it is an example value");
    });
  }

  it(`${MIN_SECRET_CHARS} random characters are accepted; an unset secret is not refused (no operator / no run tokens)`, async () => {
    const key = "k".repeat(MIN_SECRET_CHARS);
    expect((await fetchWith({ GATEWAY_TOKEN: key }, "/v1/agents", key)).status).toBe(200);
    expect((await fetchWith({ SIGNING_SECRET: key })).status).toBe(200);
    expect((await fetchWith({ GATEWAY_TOKEN: undefined } as Partial<Env>, "/healthz", null)).status).toBe(200);
    expect((await fetchWith({ SIGNING_SECRET: "" })).status).toBe(200);
  });

  it("an AGENT_TOKENS entry for an agent not in CONFIG, or an example token, answers every request 500 config_error", async () => {
    const ghost = await fetchWith({ AGENT_TOKENS: JSON.stringify({ main: strong(), ghost: strong() }) }, "/healthz");
    expect(ghost).toEqual({
      status: 500,
      json: {
        ok: false,
        error: {
          type: "config_error",
          message:
            'Invalid AGENT_TOKENS: agent "ghost" is not in CONFIG agents.entries (main, research); a token for it could never act as it',
        },
      },
    });
    // The same token file is fine once CONFIG lists the agent.
    const config = JSON.stringify({ agents: { list: [{ id: "main", default: true }, { id: "ghost" }] } });
    const tokens = JSON.stringify({ main: strong(), ghost: strong() });
    expect((await fetchWith({ AGENT_TOKENS: tokens, CONFIG: config } as unknown as Partial<Env>)).status).toBe(200);

    const copied = await fetchWith({
      AGENT_TOKENS: JSON.stringify({ main: "replace-with-another-output-of-openssl-rand-base64-32" }),
    });
    expect([copied.status, copied.json.error.type]).toEqual([500, "config_error"]);
    expect(copied.json.error.message).toBe(
      `Invalid AGENT_TOKENS: the token of "main" is an example value from this repository's docs; set a random one (docs/deploy.md)`,
    );
  });
});

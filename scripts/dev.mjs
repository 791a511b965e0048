#!/usr/bin/env node
// `npm start`: serve Switchboard locally (wrangler dev, local Durable Objects, no network) on the
// built-in offline model, with a dev token created on first run and kept in .dev.vars.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const port = process.env.PORT ?? "8787";
const varsFile = ".dev.vars";

function readVars() {
  if (!existsSync(varsFile)) return {};
  const out = {};
  for (const line of readFileSync(varsFile, "utf8").split("\n")) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2].replace(/^(["'])(.*)\1$/, "$2");
  }
  return out;
}

// As strong as the Worker requires (src/config/secrets.ts: 32 characters or more, no example value): 32
// random bytes each. Values kept from an older .dev.vars that the Worker would refuse are replaced.
const token = (prefix) => `${prefix}_${randomBytes(32).toString("base64url")}`;
const weak = (v) => typeof v !== "string" || v.length < 32 || v.startsWith("replace-with-");
const vars = readVars();
if (weak(vars.GATEWAY_TOKEN) || weak(vars.SIGNING_SECRET)) {
  if (existsSync(varsFile)) console.log(`${varsFile} held secrets the Worker would refuse: writing new ones.`);
  vars.GATEWAY_TOKEN = token("sbdev");
  vars.AGENT_TOKENS = JSON.stringify({ main: token("sbmain"), research: token("sbresearch") });
  vars.SIGNING_SECRET = randomBytes(32).toString("hex");
  // Other lines of the file (a provider's API key, say) are kept.
  const others = existsSync(varsFile)
    ? readFileSync(varsFile, "utf8")
        .split("\n")
        .filter((l) => l.trim() && !/^(GATEWAY_TOKEN|AGENT_TOKENS|SIGNING_SECRET)=/.test(l.trim()))
    : [];
  writeFileSync(
    varsFile,
    [
      ...others,
      `GATEWAY_TOKEN="${vars.GATEWAY_TOKEN}"`,
      `AGENT_TOKENS='${vars.AGENT_TOKENS}'`,
      `SIGNING_SECRET="${vars.SIGNING_SECRET}"`,
      "",
    ].join("\n"),
  );
}

const base = `http://127.0.0.1:${port}`;
console.log(`
Switchboard dev server — ${base}
  dev token (operator): ${vars.GATEWAY_TOKEN}
  agent tokens:         ${vars.AGENT_TOKENS ?? "(none)"}
  model:                builtin/echo (offline)

Try it:
  curl -s -X POST ${base}/v1/sessions/main/messages \\
    -H "Authorization: Bearer ${vars.GATEWAY_TOKEN}" -H "Content-Type: application/json" \\
    -d '{"message":"hello"}'
  curl -s -X POST ${base}/tools/invoke \\
    -H "Authorization: Bearer ${vars.GATEWAY_TOKEN}" -H "Content-Type: application/json" \\
    -d '{"tool":"sessions_history","args":{"sessionKey":"main"}}'
`);

const child = spawn("npx", ["wrangler", "dev", "--port", port, "--ip", "127.0.0.1", ...process.argv.slice(2)], {
  stdio: "inherit",
  // No network: no telemetry, and no fetch of the Request.cf sample from workers.cloudflare.com (a
  // placeholder `cf` object is used; Switchboard reads none of it).
  env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
});
child.on("exit", (code) => process.exit(code ?? 0));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));

#!/usr/bin/env node
// `npm run test:mcp-conformance`: the official MCP conformance suite (@modelcontextprotocol/conformance, its
// server scenarios) against /mcp under `wrangler dev`, offline, with the local CONFIG of wrangler.jsonc (the
// default origin rule: no mcp.* keys) and a fresh bearer token (docs/protocols.md, "Conformance"). The suite's
// client sends no token, so a local proxy in front of the Worker adds it and passes every other header
// through as sent (the DNS-rebinding scenario sets Host and Origin itself).
// Exits non-zero when a scenario fails that is not in scripts/mcp-conformance-baseline.yml (the scenarios
// that do not apply to a tools server, each with its reason), or when a listed one starts passing.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unstable_startWorker } from "wrangler";

const started = Date.now();
const token = randomBytes(32).toString("base64url");

process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";
const worker = await unstable_startWorker({
  config: "wrangler.jsonc",
  bindings: {
    GATEWAY_TOKEN: { type: "plain_text", value: token },
  },
  dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
});
await worker.ready;
const upstream = new URL(String(await worker.url));

// The proxy: the request as the suite sent it (method, path, headers — Host and Origin included — and body,
// streamed both ways for SSE answers), plus the bearer token.
const proxy = http.createServer((req, res) => {
  const out = http.request(
    {
      hostname: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, authorization: `Bearer ${token}` },
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on("error", (err) => {
    res.writeHead(502, { "Content-Type": "text/plain" });
    res.end(String(err));
  });
  req.pipe(out);
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${proxy.address().port}/mcp`;

const outDir = mkdtempSync(join(tmpdir(), "mcp-conformance-"));
const code = await new Promise((resolve) => {
  const child = spawn(
    "npx",
    [
      "conformance",
      "server",
      "--url",
      url,
      "--suite",
      "all",
      "--expected-failures",
      "scripts/mcp-conformance-baseline.yml",
      "--output-dir",
      outDir,
    ],
    { stdio: ["inherit", "pipe", "inherit"] },
  );
  // The suite prints "<scenario>: N passed, N failed" per scenario, listed failures included; CI reads a line of
  // that form as a test runner's closing line, so the counts are printed as checks instead.
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (text) =>
    process.stdout.write(text.replace(/(\d+) passed, (\d+) failed/g, "$1 checks passed, $2 checks failed")),
  );
  child.on("close", (c) => resolve(c ?? 1));
});

proxy.close();
await worker.dispose();
// What each scenario reported besides success, one line per check: the reason a listed scenario fails, and
// what a new failure is.
const baseline = readFileSync("scripts/mcp-conformance-baseline.yml", "utf8");
const listed = new Set(baseline.split("\n").flatMap((l) => /^\s+- (\S+)/.exec(l)?.[1] ?? []));
for (const dir of readdirSync(outDir).sort()) {
  const checks = JSON.parse(readFileSync(join(outDir, dir, "checks.json"), "utf8"));
  const scenario = dir.replace(/^server-|-\d{4}-\d\d-\d\dT.*$/g, "");
  // A listed scenario's failure is what the baseline expects; only an unlisted one is a failure of ours.
  const verdict = (status) => (listed.has(scenario) ? `not applicable (${status.toLowerCase()})` : status);
  for (const c of checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING"))
    console.log(`  ${scenario}: ${verdict(c.status)} ${c.id}: ${c.errorMessage ?? ""}`);
}
rmSync(outDir, { recursive: true, force: true });
const skipped = listed.size;
console.log(
  `\nMCP conformance: exit ${code} (${skipped} scenarios listed as not applicable) in ${Math.round((Date.now() - started) / 1000)} s`,
);
process.exit(code);

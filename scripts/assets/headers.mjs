// Response headers of the static assets (public/_headers, read by Workers Static Assets and wrangler dev):
// the operator console (/console) runs only its own bundle, talks only to this origin's /v1, is never framed
// and is never sniffed into another type (docs/contract.md, "Browser pages"). It needs no inline script; its
// elements get inline styles from Preact, and the browser test's screenshots show it as it is under this policy
// (test/node/console-browser.test.ts). /docs is the Worker's page (src/http/docs.ts); its assets are nosniff.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const CONSOLE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE_HEADERS = [
  `  Content-Security-Policy: ${CONSOLE_POLICY}`,
  "  X-Frame-Options: DENY",
  "  X-Content-Type-Options: nosniff",
  "  Referrer-Policy: no-referrer",
].join("\n");

export default function buildAssetHeaders({ publicDir }) {
  writeFileSync(
    join(publicDir, "_headers"),
    `/console\n${PAGE_HEADERS}\n/console/*\n${PAGE_HEADERS}\n/docs/*\n  X-Content-Type-Options: nosniff\n`,
  );
}

/** Where the Scalar bundle is served from: a static asset of this Worker (scripts/assets/docs.mjs). */
export const SCALAR_SCRIPT = "/docs/scalar.js";

/** The page's one inline script: Scalar's configuration. Allowed by its hash in the page's CSP (docsHeaders). */
const INIT_SCRIPT = `
Scalar.createApiReference("#api-reference", {
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: false,
});
`;

/**
 * `GET /docs`: Scalar's API reference rendering `/openapi.json`. The script is one of the Worker's
 * static assets and the default web fonts are off, so the page loads nothing from another origin and
 * works offline (test/http/openapi.test.ts).
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard API</title>
</head>
<body>
<div id="api-reference"></div>
<script src="${SCALAR_SCRIPT}"></script>
<script>${INIT_SCRIPT}</script>
</body>
</html>`;

let headers: Promise<Record<string, string>> | null = null;

/**
 * The page's security headers (docs/contract.md, "Browser pages"): a Content-Security-Policy that lets it run
 * only this origin's scripts and its own configuration (by hash), talk only to this origin and never be
 * framed; nosniff; no referrer. Scalar styles its elements inline, and may render images and workers from
 * data:/blob: URLs it makes itself.
 */
export function docsHeaders(): Promise<Record<string, string>> {
  headers ??= crypto.subtle.digest("SHA-256", new TextEncoder().encode(INIT_SCRIPT)).then((digest) => {
    const hash = btoa(String.fromCharCode(...new Uint8Array(digest)));
    return {
      "Content-Security-Policy": [
        "default-src 'self'",
        `script-src 'self' 'sha256-${hash}'`,
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
      ].join("; "),
      "X-Frame-Options": "DENY",
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
    };
  });
  return headers;
}

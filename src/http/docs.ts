/** Where the Scalar bundle is served from: a static asset of this Worker (scripts/assets/docs.mjs). */
export const SCALAR_SCRIPT = "/docs/scalar.js";

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
<script>
Scalar.createApiReference("#api-reference", {
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: false,
});
</script>
</body>
</html>`;

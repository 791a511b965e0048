import type { Hono } from "hono";
import type { AppEnv } from "./app-env";
import { describe } from "./describe";

/**
 * `GET /docs`: a self-contained reference page rendered in the browser from `/openapi.json`.
 * No CDN, no external script or font — it works on an offline dev box — and nothing here is
 * written twice: the page only renders the document.
 */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard API</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem 1.5rem 4rem; color: #1d1d1f; }
  h1 { margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ddd; text-transform: capitalize; }
  .op { border: 1px solid #e3e3e3; border-radius: 6px; margin: .8rem 0; padding: .6rem .9rem; }
  .m { display: inline-block; min-width: 4.2rem; font: 600 12px/1.8 ui-monospace, monospace; text-align: center; border-radius: 4px; color: #fff; margin-right: .5rem; }
  .GET { background: #2f7d32; } .POST { background: #1f5fbf; } .PATCH { background: #a05a00; } .DELETE { background: #b3261e; } .PUT { background: #6a3fb5; }
  code, pre { font: 13px/1.45 ui-monospace, monospace; } pre { background: #f6f8fa; padding: .6rem; overflow: auto; border-radius: 4px; }
  table { border-collapse: collapse; margin: .4rem 0; } td, th { border: 1px solid #e3e3e3; padding: .2rem .5rem; text-align: left; vertical-align: top; }
  .muted { color: #666; } summary { cursor: pointer; }
</style>
</head>
<body>
<h1>Switchboard API</h1>
<p class="muted">Generated from <a href="/openapi.json">/openapi.json</a>. Authenticate with <code>Authorization: Bearer &lt;token&gt;</code>.</p>
<div id="root">Loading…</div>
<script>
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const json = (v) => "<pre>" + esc(JSON.stringify(v, null, 2)) + "</pre>";
fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  const byTag = {};
  for (const [path, ops] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(ops)) (byTag[op.tags?.[0] ?? "other"] ??= []).push({ path, method: method.toUpperCase(), op });
  let html = "<p>" + esc(doc.info.description) + "</p>";
  for (const tag of Object.keys(byTag)) {
    html += "<h2>" + esc(tag) + "</h2>";
    for (const { path, method, op } of byTag[tag]) {
      html += '<div class="op"><div><span class="m ' + method + '">' + method + "</span><code>" + esc(path) + "</code> — " + esc(op.summary) + (op.security && op.security.length === 0 ? ' <span class="muted">(no auth)</span>' : "") + "</div>";
      if (op.description) html += "<p>" + esc(op.description) + "</p>";
      if (op.parameters?.length) html += "<table><tr><th>parameter</th><th>in</th><th>description</th></tr>" + op.parameters.map((p) => "<tr><td><code>" + esc(p.name) + "</code></td><td>" + esc(p.in) + "</td><td>" + esc(p.description) + "</td></tr>").join("") + "</table>";
      const body = op.requestBody?.content?.["application/json"]?.schema;
      if (body) html += "<details><summary>request body</summary>" + json(body) + "</details>";
      html += "<details><summary>responses</summary>" + json(op.responses) + "</details></div>";
    }
  }
  html += "<h2>schemas</h2>";
  for (const [name, schema] of Object.entries(doc.components.schemas)) html += "<details><summary><code>" + esc(name) + "</code></summary>" + json(schema) + "</details>";
  document.getElementById("root").innerHTML = html;
}).catch((e) => { document.getElementById("root").textContent = "Could not load /openapi.json: " + e; });
</script>
</body>
</html>`;

/** Public, like the document it renders. */
export function docsRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/docs",
    describe({
      tag: "meta",
      summary: "Human-readable API reference",
      ok: { description: "HTML page", contentType: "text/html" },
      public: true,
      errors: [500],
    }),
    (c) => c.html(PAGE),
  );
}

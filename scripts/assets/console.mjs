// /console: the operator console (console/, Preact), bundled with esbuild into public/console/. Static
// assets only: the page talks to the same Worker's /v1 routes and loads nothing from another origin.
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

export default async function buildConsoleAssets({ root, publicDir }) {
  const src = join(root, "console");
  const out = join(publicDir, "console");
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [join(src, "main.tsx")],
    outfile: join(out, "console.js"),
    bundle: true,
    format: "esm",
    target: "es2022",
    minify: true,
    sourcemap: false,
    jsx: "automatic",
    jsxImportSource: "preact",
    logLevel: "warning",
  });
  copyFileSync(join(src, "index.html"), join(out, "index.html"));
  copyFileSync(join(src, "console.css"), join(out, "console.css"));
}

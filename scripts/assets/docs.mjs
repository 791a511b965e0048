// /docs (src/http/docs.ts) renders /openapi.json with Scalar's API reference. Its standalone browser
// bundle is copied from node_modules into the static assets, so the page needs no network.
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

export default function buildDocsAssets({ root, publicDir }) {
  // The package exports no path to its browser bundle, so it is read from the installed package's folder.
  const pkgDir = join(root, "node_modules", "@scalar", "api-reference");
  const out = join(publicDir, "docs");
  mkdirSync(out, { recursive: true });
  copyFileSync(join(pkgDir, "dist", "browser", "standalone.js"), join(out, "scalar.js"));
}

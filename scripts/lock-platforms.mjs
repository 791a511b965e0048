#!/usr/bin/env node
// `node scripts/lock-platforms.mjs`: add package-lock.json entries for the optional platform builds
// (darwin, windows, android, musl) of workerd and Biome that npm left out.
//
// Why: npm records an optional dependency only when it can read the package's registry metadata. A
// registry mirror that lacks recent non-Linux builds (this project's CI machine has one) makes
// `npm install` drop them, and `npm ci` then refuses the lock ("Missing: … from lock file"). Each
// entry added here has the version its parent pins and the os/cpu/libc of the build, so npm skips it
// on other platforms and installs it on its own (without an integrity hash, which is unknown here).
// `npm install` keeps such entries; run this again only after an upgrade brings new platform builds.
import { readFileSync, writeFileSync } from "node:fs";

const FILE = "package-lock.json";
const lock = JSON.parse(readFileSync(FILE, "utf8"));
const pkgs = lock.packages;
const recorded = new Set(Object.keys(pkgs));

/** os, cpu and libc of a platform build named like `cli-darwin-arm64`, `workerd-windows-64`, `cli-linux-x64-musl`. */
function platformOf(name) {
  const base = name.split("/").pop();
  const os = ["android", "darwin", "linux", "win32", "windows"].find((o) => base.includes(o));
  const cpu = base.includes("arm64") ? "arm64" : /x64|-64$/.test(base) ? "x64" : undefined;
  if (!os || !cpu) return undefined;
  return { os: os === "windows" ? "win32" : os, cpu, libc: base.endsWith("-musl") ? "musl" : undefined };
}

/** The lock path `name` resolves to from the package at `from` (node_modules lookup, innermost first). */
function resolve(from, name) {
  let dir = from;
  for (;;) {
    const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
    if (candidate in pkgs) return candidate;
    if (!dir) return undefined;
    const i = dir.lastIndexOf("/node_modules/");
    dir = i >= 0 ? dir.slice(0, i) : "";
  }
}

const added = [];
for (const [from, meta] of Object.entries(pkgs)) {
  const optional = meta.optionalDependencies ?? {};
  for (const [name, version] of Object.entries(optional)) {
    const found = resolve(from, name);
    if (found && pkgs[found].version === version) continue;
    const platform = platformOf(name);
    // Modelled on a build of the same family and version that npm did record (same place in the tree).
    const sibling = Object.keys(optional)
      .map((n) => resolve(from, n))
      .find((p) => p && recorded.has(p) && pkgs[p].version === version);
    if (!platform || !sibling) continue;
    const template = pkgs[sibling];
    const target = `${sibling.slice(0, sibling.lastIndexOf("node_modules/"))}node_modules/${name}`;
    pkgs[target] = {
      version,
      cpu: [platform.cpu],
      ...(template.dev ? { dev: true } : {}),
      ...(platform.libc ? { libc: [platform.libc] } : {}),
      ...(template.license ? { license: template.license } : {}),
      optional: true,
      os: [platform.os],
      ...(template.engines ? { engines: template.engines } : {}),
    };
    added.push(`${target}@${version}`);
  }
}

writeFileSync(FILE, `${JSON.stringify(lock, null, 2)}\n`);
console.log(
  added.length ? `added:\n${added.join("\n")}\nnow run: npm install (it puts them in npm's order)` : "nothing missing",
);

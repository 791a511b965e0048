#!/usr/bin/env node
// Import-cycle check for src/ (run by .ci/run): every relative import between .ts files, type-only
// imports included (as `madge --circular` counts them), must form no cycle. Prints each cycle found
// and exits 1; prints "no import cycles" and exits 0 otherwise. Uses the TypeScript parser already
// installed, so it needs nothing else.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

const root = resolve(process.argv[2] ?? "src");

function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

function resolveImport(from, spec) {
  if (!spec.startsWith(".")) return null;
  const base = resolve(dirname(from), spec);
  for (const candidate of [base, `${base}.ts`, join(base, "index.ts")]) {
    if (candidate.endsWith(".ts") && existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** Relative module specifiers of every import/export-from and dynamic import() in a file. */
function importsOf(file) {
  const src = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const specs = [];
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      specs.push(node.moduleSpecifier.text);
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    )
      specs.push(node.arguments[0].text);
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal))
      specs.push(node.argument.literal.text);
    ts.forEachChild(node, visit);
  };
  visit(src);
  return specs.map((s) => resolveImport(file, s)).filter((p) => p !== null);
}

const files = filesUnder(root);
const graph = new Map(files.map((f) => [f, [...new Set(importsOf(f))].filter((d) => d.startsWith(root))]));

// Tarjan's strongly connected components: each component of more than one file (or a self-import) is a cycle.
let index = 0;
const indices = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const components = [];
function strongConnect(v) {
  indices.set(v, index);
  low.set(v, index++);
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!indices.has(w)) {
      strongConnect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), indices.get(w)));
  }
  if (low.get(v) === indices.get(v)) {
    const comp = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      comp.push(w);
    } while (w !== v);
    if (comp.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(comp);
  }
}
for (const f of files) if (!indices.has(f)) strongConnect(f);

const rel = (p) => relative(process.cwd(), p);
if (components.length === 0) {
  console.log(`no import cycles (${files.length} files under ${rel(root)})`);
  process.exit(0);
}
for (const comp of components) {
  // The shortest cycle through the component's first file (breadth-first), for the message.
  const inComp = new Set(comp);
  const start = [...comp].sort()[0];
  const previous = new Map();
  const queue = [start];
  let last = null;
  while (queue.length > 0 && last === null) {
    const cur = queue.shift();
    for (const next of (graph.get(cur) ?? []).filter((d) => inComp.has(d)).sort()) {
      if (next === start) {
        last = cur;
        break;
      }
      if (!previous.has(next)) {
        previous.set(next, cur);
        queue.push(next);
      }
    }
  }
  const path = [start];
  for (let at = last; at !== null && at !== start; at = previous.get(at)) path.splice(1, 0, at);
  path.push(start);
  console.log(`import cycle (${comp.length} files in the cycle's component): ${path.map(rel).join(" → ")}`);
}
process.exit(1);

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { parseConfig } from "../../src/config/load";
import { SwitchboardError } from "../../src/errors";

/**
 * The deploy path of docs/deploy.md, as wrangler reads it: `npm run deploy` ships env.production of
 * wrangler.jsonc, with every binding the Worker needs (a named environment inherits none), its own CONFIG,
 * and the same bundle the CI dry run checks.
 */
const local = unstable_readConfig({ config: "wrangler.jsonc" });
const production = unstable_readConfig({ config: "wrangler.jsonc", env: "production" });

describe("wrangler.jsonc: the production environment", () => {
  it("has every binding, migration and required secret of the local Worker", () => {
    const bindings = (c: typeof local) => ({
      durableObjects: c.durable_objects.bindings.map((b: { name: string; class_name: string }) => [
        b.name,
        b.class_name,
      ]),
      r2: c.r2_buckets.map((b: { binding: string; bucket_name?: string }) => [b.binding, b.bucket_name]),
      ratelimits: c.ratelimits.map((r: { name: string; simple: unknown }) => [r.name, r.simple]),
      migrations: c.migrations,
      secrets: c.secrets?.required,
      assets: c.assets?.directory,
      compatibility: [c.compatibility_date, c.compatibility_flags],
    });
    expect(bindings(production)).toEqual(bindings(local));
    expect(production.r2_buckets).toEqual([{ binding: "ARCHIVE", bucket_name: "switchboard-archive" }]);
    expect(production.secrets?.required).toEqual(["GATEWAY_TOKEN", "AGENT_TOKENS", "SIGNING_SECRET"]);
  });

  it("declares its own valid CONFIG, and a plain `wrangler deploy` goes to another Worker than production", () => {
    const cfg = parseConfig(production.vars.CONFIG);
    expect(cfg).not.toBeInstanceOf(SwitchboardError);
    expect(production.name).toBe("switchboard");
    expect(local.name).not.toBe(production.name);
  });

  it("the CI dry run is `npm run deploy` plus --dry-run: it bundles what a deploy ships", () => {
    const scripts = JSON.parse(readFileSync("package.json", "utf8")).scripts;
    expect(scripts.deploy).toBe("wrangler deploy --env production");
    expect(scripts["deploy:check"]).toBe("npm run deploy -- --dry-run --outdir .wrangler/dry-run");
    expect(readFileSync(".ci/run", "utf8")).toMatch(/^npm run deploy:check\b/m);
  });

  it("docs/deploy.md names every binding production gets and its number of Durable Object classes", () => {
    const doc = readFileSync("docs/deploy.md", "utf8");
    const names = [
      ...production.durable_objects.bindings.map((b: { name: string }) => b.name),
      ...production.r2_buckets.map((b: { binding: string }) => b.binding),
      ...production.ratelimits.map((r: { name: string }) => r.name),
      ...Object.keys(production.vars),
    ];
    const listed = doc.match(/It lists the bindings production gets \(([^)]*)\)/)?.[1] ?? "";
    expect(names.filter((n) => !listed.includes(`\`${n}\``))).toEqual([]);
    const classes = new Set(production.durable_objects.bindings.map((b: { class_name: string }) => b.class_name)).size;
    expect(doc).toContain(`One Worker with ${["zero", "one", "two", "three", "four"][classes]} Durable Object classes`);
  });

  it("docs/deploy.md's first deploy carries the required secrets, from a file git ignores", () => {
    // wrangler refuses to create a Worker whose config requires secrets it was not given, and `wrangler secret
    // put` cannot set one before the Worker exists: the first `npm run deploy` of the page must bring them.
    expect(production.secrets?.required?.length).toBeGreaterThan(0);
    const doc = readFileSync("docs/deploy.md", "utf8");
    const first = doc.split("\n").find((line) => /^npm run deploy(\s|$)/.test(line));
    const file = first?.match(/--secrets-file (\S+)/)?.[1];
    expect(file, first).toBeDefined();
    const ignored = readFileSync(".gitignore", "utf8")
      .split("\n")
      .filter((l) => l.includes("*"))
      .map((l) => new RegExp(`^${l.trim().replace(/[.]/g, "\\.").replaceAll("*", "[^/]*")}$`));
    expect(ignored.some((re) => re.test(file!))).toBe(true);
    // The page writes every required secret into that file.
    const written = doc.slice(0, doc.indexOf(first!));
    for (const name of production.secrets!.required!) expect(written).toContain(`${name}: `);
  });
});

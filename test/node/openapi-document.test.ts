import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unstable_startWorker } from "wrangler";

/**
 * The served document checked by an OpenAPI validator independent of the library that generates it
 * (Ajv with the official OpenAPI 3.1 schema; it compiles schemas to code, so it runs here, in Node),
 * and /docs's assets as `wrangler dev` serves them (static assets are routed before the Worker there,
 * which the workerd test pool does not do).
 */

let worker: Awaited<ReturnType<typeof unstable_startWorker>>;

beforeAll(async () => {
  worker = await unstable_startWorker({
    config: "wrangler.jsonc",
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
  });
  await worker.ready;
}, 60_000);

afterAll(async () => {
  await worker?.dispose();
});

describe("/openapi.json under wrangler dev", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    const res = await worker.fetch("http://localhost/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Record<string, unknown>;
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    // The validator also resolves every $ref of the document.
    expect(() => validator.resolveRefs()).not.toThrow();
  });

  it("serves /docs with Scalar's bundle from the Worker's static assets", async () => {
    const html = await (await worker.fetch("http://localhost/docs")).text();
    const scripts = [...html.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]);
    expect(scripts).toEqual(["/docs/scalar.js"]);
    const asset = await worker.fetch(`http://localhost${scripts[0]}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect(await asset.text()).toContain("createApiReference");
  });
});

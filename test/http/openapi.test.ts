import { describe, expect, it } from "vitest";
import { createApp } from "../../src/http/app";
import { SCALAR_SCRIPT } from "../../src/http/docs";
import { TOOLS } from "../../src/tools/registry";
import { call, MAIN_TOKEN } from "../helpers/http";

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, any>>;
  components: { schemas: Record<string, any>; securitySchemes: Record<string, unknown> };
};

async function getDoc(): Promise<Doc> {
  const r = await call("GET", "/openapi.json", undefined, { token: null });
  expect(r.status).toBe(200);
  return r.json;
}

/** Every `$ref` in the document, with where it was found. */
function refs(v: unknown, at = "#"): [string, string][] {
  if (Array.isArray(v)) return v.flatMap((x, i) => refs(x, `${at}/${i}`));
  if (typeof v !== "object" || v === null) return [];
  return Object.entries(v).flatMap(([k, x]) =>
    k === "$ref" && typeof x === "string" ? [[x, at] as [string, string]] : refs(x, `${at}/${k}`),
  );
}

describe("GET /openapi.json", () => {
  it("is public OpenAPI 3.1 with bearer auth declared", async () => {
    const doc = await getDoc();
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
  });

  it("documents every route the app serves (none undocumented)", async () => {
    const doc = await getDoc();
    // Every method route of the production app: a route added without routeDoc(...) is missing here.
    const served = createApp()
      .routes.filter((r) => ["GET", "POST", "PATCH", "PUT", "DELETE"].includes(r.method))
      // A segment that starts with `:` is a parameter; a `:` inside one (A2A's `message:send`) is literal.
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/\/:([A-Za-z0-9_]+)/g, "/{$1}")}`);
    expect(served.length).toBeGreaterThan(15);
    for (const expected of [
      "post /v1/runs/{id}/complete",
      "get /v1/tools",
      "post /v1/sessions/{key}/messages",
      "get /v1/runs/{id}/wait",
      "post /tools/invoke",
      "post /mcp",
      "get /healthz",
      "get /openapi.json",
    ])
      expect(served).toContain(expected);
    for (const op of served) {
      const [method, path] = op.split(" ");
      const entry = doc.paths[path]?.[method];
      expect(entry, `${op} is documented`).toBeDefined();
      expect(entry.summary, `${op} has a summary`).not.toBe("(undocumented)");
    }
    expect(doc.paths["/mcp"].post).toBeDefined();
    expect(Object.keys(doc.paths).some((p) => p.includes("_bench"))).toBe(false);
  });

  it("is structurally valid: unique operationIds, declared path parameters, every $ref resolves", async () => {
    const doc = await getDoc();
    const ids = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      for (const [method, op] of Object.entries(ops)) {
        expect(ids.has(op.operationId), `duplicate operationId ${op.operationId}`).toBe(false);
        ids.add(op.operationId);
        const declared = (op.parameters ?? [])
          .filter((p: any) => p.in === "path")
          .map((p: any) => p.name)
          .sort();
        expect(declared, `${method} ${path} path params`).toEqual(templated);
        expect(Object.keys(op.responses).length).toBeGreaterThan(0);
      }
    }
    for (const [r, at] of refs(doc)) {
      expect(r.startsWith("#/components/schemas/"), `${at}: ${r}`).toBe(true);
      expect(doc.components.schemas[r.slice("#/components/schemas/".length)], `${at}: ${r} resolves`).toBeDefined();
    }
  });

  it("derives request bodies and tool arguments from the zod schemas", async () => {
    const doc = await getDoc();
    const message = doc.paths["/v1/sessions/{key}/messages"].post.requestBody.content["application/json"].schema;
    expect(message).toMatchObject({ type: "object", required: ["message"] });
    expect(message.properties.chatType).toEqual({ type: "string", enum: ["direct", "group", "channel"] });
    const complete = doc.paths["/v1/runs/{id}/complete"].post.requestBody.content["application/json"].schema;
    expect(Object.keys(complete.properties)).toEqual(["reply", "error", "usage", "model"]);
    const invoke = doc.paths["/tools/invoke"].post.requestBody.content["application/json"].schema;
    expect(invoke.oneOf.map((v: any) => v.properties.tool.const).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    for (const t of TOOLS)
      expect(doc.components.schemas[`${t.name}.args`]).toMatchObject({ type: "object", description: t.description });
    expect(doc.components.schemas["sessions_history.args"].required).toEqual(["sessionKey"]);
  });

  it("keeps the error envelope for wrong methods; /v1/tools needs a token and lists the caller's tools", async () => {
    const post = await call("POST", "/openapi.json", {}, { token: null });
    expect(post.status).toBe(405);
    expect(post.json).toMatchObject({ ok: false, error: { type: "method_not_allowed" } });
    expect((await call("GET", "/v1/tools", undefined, { token: null })).status).toBe(401);
    const tools = await call("GET", "/v1/tools", undefined, { token: MAIN_TOKEN });
    expect(tools.json.sessionKey).toBe("agent:main:main");
    expect(tools.json.tools.map((t: any) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    const sub = await call("GET", "/v1/tools", undefined, {
      token: MAIN_TOKEN,
      headers: { "X-Session-Key": `agent:main:subagent:${crypto.randomUUID()}` },
    });
    expect(sub.json.tools.map((t: any) => t.name)).not.toContain("sessions_spawn");
  });
});

describe("GET /docs", () => {
  it("is Scalar's reference of /openapi.json, loading only same-origin assets", async () => {
    const r = await call("GET", "/docs", undefined, { token: null });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/html/);
    const html = r.json as string;
    expect(html).toContain('url: "/openapi.json"');
    // Scalar's default web fonts come from its CDN: they are off, so nothing is fetched from another origin.
    expect(html).toContain("withDefaultFonts: false");
    const refs = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
    expect(refs).toEqual([SCALAR_SCRIPT]);
    // Same-origin paths only; that wrangler dev serves them from public/ is test/node/openapi-document.test.ts.
    for (const ref of refs) expect(ref, "a same-origin path").toMatch(/^\/(?!\/)/);
    expect(html).not.toMatch(/https?:\/\//);
  });
});

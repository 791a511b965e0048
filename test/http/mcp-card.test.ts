import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { MCP_PROTOCOL_VERSIONS } from "../../src/http/mcp-guard";
import { TOOLS } from "../../src/tools/registry";

/**
 * MCP discovery (src/http/mcp-card.ts, docs/protocols.md "Discovery"): the Server Card and the MCP Catalog
 * are public, follow the server-card extension's v2 shape, come from the tool registry, and say nothing
 * about CONFIG, sessions or tokens.
 */

const get = (path: string, headers: Record<string, string> = {}) =>
  exports.default.fetch(`https://switchboard.test${path}`, { headers });

describe("MCP discovery", () => {
  it("serves the Server Card without a token, at the well-known path and next to /mcp, from the registry", async () => {
    const res = await get("/.well-known/mcp/server-card.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("cache-control")).toBe("public, max-age=3600");
    const card = (await res.json()) as any;
    expect(card).toEqual({
      $schema: "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json",
      name: "test.switchboard/switchboard",
      version: "0.1.0",
      title: "Switchboard",
      description: expect.any(String),
      remotes: [
        {
          type: "streamable-http",
          url: "https://switchboard.test/mcp",
          headers: [
            { name: "Authorization", description: expect.any(String), isRequired: true, isSecret: true },
            { name: "X-Session-Key", description: expect.any(String), isRequired: false, isSecret: false },
          ],
          supportedProtocolVersions: [...MCP_PROTOCOL_VERSIONS],
        },
      ],
      _meta: { "switchboard/tools": TOOLS.map((t) => ({ name: t.name, description: t.description })) },
    });
    // The v2 schema's rules for the fields it bounds.
    expect(card.name).toMatch(/^[a-zA-Z0-9.-]+\/[a-zA-Z0-9._-]+$/);
    expect(card.description.length).toBeLessThanOrEqual(100);
    expect(card.remotes[0].supportedProtocolVersions[0]).toBe("2026-07-28");

    const beside = await get("/mcp/server-card", { Accept: "application/mcp-server-card+json" });
    expect(beside.status).toBe(200);
    expect(beside.headers.get("content-type")).toBe("application/mcp-server-card+json");
    expect(await beside.json()).toEqual(card);
  });

  it("reveals nothing of CONFIG, sessions or tokens: another CONFIG gives the same card", async () => {
    const before = await (await get("/.well-known/mcp/server-card.json")).text();
    for (const secret of [env.GATEWAY_TOKEN, ...Object.values(JSON.parse(env.AGENT_TOKENS) as Record<string, string>)])
      expect(before).not.toContain(secret);
    setConfigOverride({ agents: { list: [{ id: "secret-agent-name", default: true }] } });
    const after = await (await get("/.well-known/mcp/server-card.json")).text();
    expect(after).toBe(before);
    expect(after).not.toContain("secret-agent-name");
  });

  it("serves the site's MCP Catalog pointing at the card", async () => {
    const res = await get("/.well-known/mcp/catalog.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(await res.json()).toEqual({
      specVersion: "draft",
      entries: [
        {
          identifier: "urn:air:switchboard.test:switchboard",
          displayName: "Switchboard",
          type: "application/mcp-server-card+json",
          url: "https://switchboard.test/mcp/server-card",
        },
      ],
    });
  });
});

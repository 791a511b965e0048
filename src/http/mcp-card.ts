import type { z } from "zod";
import { TOOLS } from "../tools/registry";
import type { mcpCatalogSchema, mcpServerCardSchema } from "./api-schemas";
import { MCP_PROTOCOL_VERSIONS } from "./mcp-guard";
import { MCP_SERVER_INFO } from "./mcp-tools";

/**
 * MCP discovery (docs/protocols.md, "Discovery"): the Server Card of `/mcp` and the site's MCP Catalog,
 * built from the request's origin, the tool registry and the revisions `/mcp` serves — never from CONFIG,
 * tokens or sessions, because both are public.
 */

export const SERVER_CARD_TYPE = "application/mcp-server-card+json";

/** The card's reverse-DNS name: the host name reversed (characters its grammar refuses become `-`), then `/switchboard`. */
function cardName(hostname: string): string {
  const reversed = hostname
    .split(".")
    .reverse()
    .join(".")
    .replace(/[^a-zA-Z0-9.-]/g, "-");
  return `${reversed.replace(/^[-.]+|[-.]+$/g, "") || "localhost"}/switchboard`;
}

export function serverCard(origin: string): z.infer<typeof mcpServerCardSchema> {
  const url = new URL(origin);
  return {
    $schema: "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json",
    name: cardName(url.hostname),
    version: MCP_SERVER_INFO.version,
    title: "Switchboard",
    description: "Session tools for AI agents: list, read and message sessions, and spawn sub-agents",
    remotes: [
      {
        type: "streamable-http",
        url: `${url.origin}/mcp`,
        headers: [
          {
            name: "Authorization",
            description: "Bearer <token>: the gateway token, an agent token or a run token (docs/clients.md)",
            isRequired: true,
            isSecret: true,
          },
          {
            name: "X-Session-Key",
            description: "The requester session (default: main of the token's agent)",
            isRequired: false,
            isSecret: false,
          },
        ],
        supportedProtocolVersions: [...MCP_PROTOCOL_VERSIONS],
      },
    ],
    _meta: { "switchboard/tools": TOOLS.map((t) => ({ name: t.name, description: t.description })) },
  };
}

export function mcpCatalog(origin: string): z.infer<typeof mcpCatalogSchema> {
  const url = new URL(origin);
  return {
    specVersion: "draft",
    entries: [
      {
        identifier: `urn:air:${url.hostname}:switchboard`,
        displayName: "Switchboard",
        type: SERVER_CARD_TYPE,
        url: `${url.origin}/mcp/server-card`,
      },
    ],
  };
}

/** Public, read-only metadata: any site may read it (the discovery documents' CORS rule), cached for an hour. */
export const DISCOVERY_HEADERS = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Methods": "GET",
  "Access-Control-Allow-Headers": "Content-Type",
  "Cache-Control": "public, max-age=3600",
};

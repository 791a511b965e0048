import { type Context, Hono } from "hono";
import { mcpCatalogSchema, mcpServerCardSchema } from "../api-schemas";
import type { AppEnv } from "../app-env";
import { DISCOVERY_HEADERS, mcpCatalog, SERVER_CARD_TYPE, serverCard } from "../mcp-card";
import { routeDoc } from "../route-doc";
import { MCP_CARD_TEXT } from "../route-texts";

/** The card, as `application/mcp-server-card+json` when the client asks for that type, else as JSON. */
function cardResponse(c: Context<AppEnv>) {
  const card = serverCard(new URL(c.req.url).origin);
  const asked = c.req.header("Accept")?.includes(SERVER_CARD_TYPE);
  return c.json(card, 200, { ...DISCOVERY_HEADERS, ...(asked ? { "Content-Type": SERVER_CARD_TYPE } : {}) });
}

const cardDoc = (summary: string) =>
  routeDoc({
    tag: "meta",
    summary,
    description: MCP_CARD_TEXT,
    ok: { description: "The MCP Server Card", schema: mcpServerCardSchema },
    public: true,
  });

/** MCP discovery (docs/protocols.md, "Discovery"): public documents built from the tool registry. */
export const discoveryApp = new Hono<AppEnv>()
  .get("/.well-known/mcp/server-card.json", cardDoc("MCP Server Card (well-known location)"), cardResponse)
  .get("/mcp/server-card", cardDoc("MCP Server Card (next to the endpoint)"), cardResponse)
  .get(
    "/.well-known/mcp/catalog.json",
    routeDoc({
      tag: "meta",
      summary: "MCP Catalog of this site",
      description: "One entry: this server's card (`/mcp/server-card`). Public.",
      ok: { description: "The MCP Catalog", schema: mcpCatalogSchema },
      public: true,
    }),
    (c) => c.json(mcpCatalog(new URL(c.req.url).origin), 200, DISCOVERY_HEADERS),
  );

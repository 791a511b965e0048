import { exports } from "cloudflare:workers";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { MCP_CURRENT_REVISION, MCP_PROTOCOL_VERSIONS } from "../../src/http/mcp-guard";
import { TOOLS } from "../../src/tools/registry";
import { GATEWAY, sendAndWait } from "../helpers/http";

/**
 * The rules /mcp applies around the SDK (src/http/mcp-guard.ts, docs/protocols.md "MCP"): the protocol
 * revisions it serves (the current one with the SDK's own v2 client), `MCP-Protocol-Version`, batches
 * only before 2025-06-18, and the Origin/Host rule of the Streamable HTTP transport.
 */

const ACCEPT = "application/json, text/event-stream";

function post(body: unknown, headers: Record<string, string> = {}, url = "https://switchboard.test/mcp") {
  return exports.default.fetch(url, {
    method: "POST",
    headers: { Authorization: `Bearer ${GATEWAY}`, "Content-Type": "application/json", Accept: ACCEPT, ...headers },
    body: JSON.stringify(body),
  });
}

const initialize = (protocolVersion: string) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion, capabilities: {}, clientInfo: { name: "t", version: "1" } },
});

describe("/mcp protocol revisions", () => {
  it("serves the current revision to the SDK's v2 client pinned to it: discover, tools/list, tools/call", async () => {
    expect(MCP_CURRENT_REVISION).toBe("2026-07-28");
    const key = `agent:main:mcp-modern-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(key, "hello modern");
    const transport = new ModernTransport(new URL("https://switchboard.test/mcp"), {
      requestInit: { headers: { Authorization: `Bearer ${GATEWAY}`, "X-Session-Key": key } },
      fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
    });
    const client = new ModernClient(
      { name: "switchboard-modern-test", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: MCP_CURRENT_REVISION } } },
    );
    await client.connect(transport);
    expect(client.getNegotiatedProtocolVersion()).toBe(MCP_CURRENT_REVISION);
    expect(client.getServerVersion()).toMatchObject({ name: "switchboard" });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    const history = await client.callTool({ name: "sessions_history", arguments: { sessionKey: key } });
    expect((history.structuredContent as { messages: { role: string }[] }).messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
    ]);
    await client.close();
  });

  it("the v2 client in auto mode picks the current revision; a 2025 initialize gets the revision it asked for", async () => {
    const client = new ModernClient({ name: "auto", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(
      new ModernTransport(new URL("https://switchboard.test/mcp"), {
        requestInit: { headers: { Authorization: `Bearer ${GATEWAY}` } },
        fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
      }),
    );
    expect(client.getNegotiatedProtocolVersion()).toBe(MCP_CURRENT_REVISION);
    await client.close();
    for (const v of ["2025-11-25", "2025-06-18", "2025-03-26"]) {
      const res = await post(initialize(v));
      expect(res.status).toBe(200);
      expect(((await res.json()) as { result: { protocolVersion: string } }).result.protocolVersion).toBe(v);
    }
  });

  it("an MCP-Protocol-Version it does not serve is a 400 naming the ones it does", async () => {
    const res = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" }, { "MCP-Protocol-Version": "1999-01-01" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toBe(
      `Bad Request: Unsupported protocol version: 1999-01-01 (supported versions: ${MCP_PROTOCOL_VERSIONS.join(", ")})`,
    );
    for (const v of ["2025-11-25", "2025-06-18", "2025-03-26"]) {
      const ok = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, { "MCP-Protocol-Version": v });
      expect([v, ok.status]).toEqual([v, 200]);
    }
  });

  it("refuses JSON-RPC batches under 2025-06-18 and later; accepts them under 2025-03-26 or without the header", async () => {
    const batch = [
      { jsonrpc: "2.0", id: 1, method: "ping" },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    ];
    for (const v of ["2025-06-18", "2025-11-25", MCP_CURRENT_REVISION]) {
      const res = await post(batch, { "MCP-Protocol-Version": v });
      expect(res.status, v).toBe(400);
      expect(await res.json()).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: {
          code: -32600,
          message: `JSON-RPC batches are not supported under protocol ${v} (removed in 2025-06-18)`,
        },
      });
    }
    for (const headers of [{ "MCP-Protocol-Version": "2025-03-26" }, {}] as Record<string, string>[]) {
      const res = await post(batch, headers);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { id: number }[]).map((r) => r.id)).toEqual([1, 2]);
    }
  });
});

describe("/mcp Origin and Host (the transport spec's DNS-rebinding rule)", () => {
  const ping = { jsonrpc: "2.0", id: 1, method: "ping" };

  it("a foreign Origin is a 403, whatever the token; no Origin and a loopback origin are served", async () => {
    const foreign = await post(ping, { Origin: "https://evil.example.com" });
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32000, message: "Forbidden: origin https://evil.example.com is not allowed" },
    });
    // Refused before authentication: no token, still 403 (not 401).
    const anonymous = await exports.default.fetch("https://switchboard.test/mcp", {
      method: "POST",
      headers: { Origin: "https://evil.example.com", "Content-Type": "application/json" },
      body: JSON.stringify(ping),
    });
    expect(anonymous.status).toBe(403);
    expect((await post(ping, { Origin: "null" })).status).toBe(403);
    expect((await post(ping)).status).toBe(200);
    for (const origin of ["http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8080"])
      expect([origin, (await post(ping, { Origin: origin })).status]).toEqual([origin, 200]);
  });

  it("the DNS-rebinding case — a page whose Origin is the request's own Host — is a 403 by default", async () => {
    // The attacker's name resolves to the server: the page and its request share that host name.
    const rebound = await post(ping, { Origin: "http://evil.example.com:8787" }, "http://evil.example.com:8787/mcp");
    expect(rebound.status).toBe(403);
    expect((await post(ping, { Origin: "https://switchboard.test" })).status).toBe(403);
    // A deployment whose own pages call /mcp lists its host name.
    setConfigOverride({ mcp: { allowedOrigins: ["switchboard.test"] } });
    expect((await post(ping, { Origin: "https://switchboard.test" })).status).toBe(200);
  });

  it("mcp.allowedOrigins lets a listed browser origin in", async () => {
    setConfigOverride({ mcp: { allowedOrigins: ["app.example.com"] } });
    expect((await post(ping, { Origin: "https://app.example.com" })).status).toBe(200);
    expect((await post(ping, { Origin: "https://other.example.com" })).status).toBe(403);
  });

  it("with mcp.allowedHosts, a request for another host name is a 403, even from its own origin", async () => {
    setConfigOverride({ mcp: { allowedHosts: ["localhost", "127.0.0.1"] } });
    const rebound = await post(ping, { Origin: "http://evil.example.com" }, "http://evil.example.com/mcp");
    expect(rebound.status).toBe(403);
    expect(((await rebound.json()) as { error: { message: string } }).error.message).toBe(
      "Forbidden: host evil.example.com is not allowed",
    );
    expect((await post(ping, { Origin: "http://localhost:8787" }, "http://localhost:8787/mcp")).status).toBe(200);
    expect((await post(ping, {}, "http://127.0.0.1:8787/mcp")).status).toBe(200);
    // Pages of an allowed host may call it too.
    setConfigOverride({ mcp: { allowedHosts: ["switchboard.test"] } });
    expect((await post(ping, { Origin: "https://switchboard.test" })).status).toBe(200);
  });
});

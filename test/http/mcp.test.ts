import { exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { capMcpWait, MCP_MAX_WAIT_SECONDS } from "../../src/http/mcp";
import { TOOLS } from "../../src/tools/registry";
import { call, GATEWAY, MAIN_TOKEN, sendAndWait } from "../helpers/http";

/** The official MCP SDK client, talking to the Worker through its fetch handler (`exports.default`). */
async function connect(opts: { token?: string; sessionKey?: string } = {}): Promise<Client> {
  const headers: Record<string, string> = { Authorization: `Bearer ${opts.token ?? GATEWAY}` };
  if (opts.sessionKey) headers["X-Session-Key"] = opts.sessionKey;
  const transport = new StreamableHTTPClientTransport(new URL("https://switchboard.test/mcp"), {
    requestInit: { headers },
    fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
  });
  const client = new Client({ name: "switchboard-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

function textOf(r: unknown): string {
  return (((r as { content?: unknown }).content as { type: string; text: string }[]) ?? []).map((b) => b.text).join("");
}

describe("/mcp with the official SDK client", () => {
  it("lists every registered tool with a JSON Schema derived from its zod schema", async () => {
    const client = await connect();
    expect(client.getServerVersion()).toMatchObject({ name: "switchboard" });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    const history = tools.find((t) => t.name === "sessions_history")!;
    expect(history.inputSchema).toMatchObject({ type: "object", required: ["sessionKey"] });
    expect((history.inputSchema.properties as Record<string, unknown>).limit).toMatchObject({
      type: "number",
      minimum: 1,
    });
    for (const t of tools) expect(t.description!.length).toBeGreaterThan(20);
    const send = tools.find((t) => t.name === "sessions_send");
    if (send) expect(send.description).toContain(`capped at ${MCP_MAX_WAIT_SECONDS} seconds`);
    await client.close();
  });

  it("calls each tool: payload as text and as structuredContent, same as /tools/invoke", async () => {
    // Visibility "agent" lets the caller reach a sibling session with sessions_send.
    setConfigOverride({
      agents: { list: [{ id: "main", default: true }, { id: "research" }] },
      tools: { sessions: { visibility: "agent" } },
    });
    const key = `agent:main:mcp-${crypto.randomUUID().slice(0, 8)}`;
    const sibling = `agent:main:mcp-sibling-${crypto.randomUUID().slice(0, 8)}`;
    await sendAndWait(key, "hello over mcp");
    await sendAndWait(sibling, "hello sibling");
    const client = await connect({ sessionKey: key });
    const sample: Record<string, Record<string, unknown>> = {
      sessions_list: { limit: 5 },
      sessions_history: { sessionKey: key },
      sessions_search: { query: "hello" },
      agents_list: {},
      sessions_send: { sessionKey: sibling, message: "ping from mcp", timeoutSeconds: 0 },
      sessions_spawn: { task: "say hi" },
      session_status: { changesSince: 0 },
      sessions_yield: {},
      subagents: { action: "list" },
    };
    const history = await client.callTool({ name: "sessions_history", arguments: { sessionKey: key } });
    const rest = await call("POST", "/tools/invoke", {
      tool: "sessions_history",
      args: { sessionKey: key },
      sessionKey: key,
    });
    expect(history.structuredContent).toEqual(rest.json.result.details);
    expect(textOf(history)).toBe(rest.json.result.content[0].text);
    expect((history.structuredContent as { messages: { role: string }[] }).messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
    ]);
    // Each tool, last (sessions_spawn announces into this transcript later).
    const { tools } = await client.listTools();
    for (const t of tools) {
      expect(sample[t.name], `sample args for ${t.name}`).toBeDefined();
      const r = await client.callTool({ name: t.name, arguments: sample[t.name] });
      // sessions_yield has no model turn to end over MCP: its refusal (a tool error) is the expected answer.
      expect(Boolean(r.isError), `${t.name}: ${textOf(r)}`).toBe(t.name === "sessions_yield");
      // session_status's text is its status card (docs/contract.md); every other tool's is its payload's JSON.
      if (t.name === "session_status")
        expect(textOf(r)).toBe((r.structuredContent as { statusText: string }).statusText);
      else expect(JSON.parse(textOf(r))).toEqual(r.structuredContent);
    }
    const agents = await client.callTool({ name: "agents_list", arguments: {} });
    expect(agents.structuredContent).toMatchObject({ requester: "main" });
    await client.close();
  });

  it("a refusal is a tool error carrying the same payload and text", async () => {
    const client = await connect({ token: MAIN_TOKEN });
    const missing = crypto.randomUUID();
    const r = await client.callTool({ name: "sessions_history", arguments: { sessionKey: missing } });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toEqual({
      status: "error",
      error: `Session not found: ${missing} (use the full sessionKey from sessions_list)`,
    });
    expect(JSON.parse(textOf(r))).toEqual(r.structuredContent);
    await client.close();
  });

  it("a validation error is a tool error naming the field", async () => {
    const client = await connect();
    const wrongType = await client.callTool({
      name: "sessions_history",
      arguments: { sessionKey: "main", limit: "ten" },
    });
    expect(wrongType.isError).toBe(true);
    expect(textOf(wrongType)).toBe("limit: Invalid input: expected number, received string");
    const missing = await client.callTool({ name: "sessions_history", arguments: {} });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe("sessionKey required");
    await client.close();
  });

  it("an unknown tool is a protocol error; a sub-agent session does not see the session tools", async () => {
    const client = await connect();
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(
      /Unknown tool: no_such_tool/,
    );
    await client.close();
    const sub = await connect({ sessionKey: `agent:main:subagent:${crypto.randomUUID()}` });
    const { tools } = await sub.listTools();
    expect(tools.map((t) => t.name)).not.toContain("sessions_list");
    await expect(sub.callTool({ name: "sessions_list", arguments: {} })).rejects.toThrow(
      /Tool not available for this session: sessions_list/,
    );
    await sub.close();
  });

  it("auth: no token is a 401 envelope; a key outside the token's agent is a 403", async () => {
    const noAuth = await call("POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "ping" }, { token: null });
    expect(noAuth.status).toBe(401);
    expect(noAuth.json.ok).toBe(false);
    const cross = await call(
      "POST",
      "/mcp",
      { jsonrpc: "2.0", id: 1, method: "tools/list" },
      { token: MAIN_TOKEN, headers: { "X-Session-Key": "agent:research:main" } },
    );
    expect(cross.status).toBe(403);
    expect(cross.json.error.type).toBe("forbidden");
  });

  it("speaks plain JSON-RPC: notifications get 202, unknown methods -32601, GET is 405", async () => {
    const note = await call("POST", "/mcp", { jsonrpc: "2.0", method: "notifications/initialized" });
    expect(note.status).toBe(202);
    const unknown = await call("POST", "/mcp", { jsonrpc: "2.0", id: 7, method: "resources/list" });
    expect(unknown.json).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: { code: -32601, message: "Method not found" },
    });
    const bad = await call("POST", "/mcp", "{not json");
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(-32700);
    // `arguments` is an object or absent: null is refused by the SDK's schema, never read as "no arguments".
    const nullArgs = await call("POST", "/mcp", {
      jsonrpc: "2.0",
      id: 8,
      method: "tools/call",
      params: { name: "sessions_list", arguments: null },
    });
    expect(nullArgs.status).toBe(200);
    expect(nullArgs.json).toMatchObject({ id: 8, error: { code: -32602 } });
    expect(nullArgs.json.error.message).toContain("expected record, received null");
    const get = await call("GET", "/mcp");
    expect(get.status).toBe(405);
  });

  it("caps sessions_send waits below the MCP client's 60 s request timeout", () => {
    expect(MCP_MAX_WAIT_SECONDS).toBeLessThan(60);
    expect(capMcpWait("sessions_send", { sessionKey: "x", timeoutSeconds: 600 })).toEqual({
      sessionKey: "x",
      timeoutSeconds: MCP_MAX_WAIT_SECONDS,
    });
    expect(capMcpWait("sessions_send", { timeout_seconds: 120 })).toEqual({ timeout_seconds: MCP_MAX_WAIT_SECONDS });
    expect(capMcpWait("sessions_send", { timeoutSeconds: 0 })).toEqual({ timeoutSeconds: 0 });
    expect(capMcpWait("sessions_history", { timeoutSeconds: 600 })).toEqual({ timeoutSeconds: 600 });
  });
});

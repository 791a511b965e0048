import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { createMCPClient } from "@ai-sdk/mcp";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { MCPServerStreamableHttp } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unstable_startWorker } from "wrangler";

/**
 * The clients of docs/clients.md, run as a user runs them: the typed client imported by its package name
 * (`switchboard/client`, built as `npm install` builds it), the AI SDK's MCP client and the OpenAI Agents
 * SDK's MCP server adapter, each against the Worker under `wrangler dev` with a bearer token.
 */

const TOKEN = randomBytes(32).toString("base64url");
let worker: Awaited<ReturnType<typeof unstable_startWorker>>;
let base = "";

beforeAll(async () => {
  execFileSync("node", ["scripts/build-client.mjs"], { stdio: "ignore" });
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  worker = await unstable_startWorker({
    config: "wrangler.jsonc",
    bindings: { GATEWAY_TOKEN: { type: "plain_text", value: TOKEN } },
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
  });
  await worker.ready;
  base = String(await worker.url).replace(/\/$/, "");
}, 90_000);

afterAll(async () => {
  await worker?.dispose();
});

const headers = () => ({ Authorization: `Bearer ${TOKEN}` });

describe("clients of docs/clients.md", () => {
  it("the typed client, imported as switchboard/client: a tool call, a REST wait, and the session's events as they happen", async () => {
    const { SwitchboardClient, SwitchboardApiError } = await import("switchboard/client");
    const sb = new SwitchboardClient({ baseUrl: base, token: TOKEN });
    const key = `agent:main:clients-${randomBytes(4).toString("hex")}`;

    const accepted = await sb.sendMessage(key, { message: "hello from the package" });
    // From the first retained event ("0"), so nothing sent before the watch began is missed.
    const events: { event: string; data: any }[] = [];
    const abort = new AbortController();
    const watching = (async () => {
      for await (const e of sb.watchSession(key, { lastEventId: "0", signal: abort.signal })) {
        events.push(e);
        if (e.event === "message" && (e.data as { role?: string }).role === "assistant") abort.abort();
      }
    })();
    const run = await sb.waitRun(accepted.runId, 20_000);
    expect([run.status, run.reply]).toEqual(["ok", "hello from the package"]);
    await watching;
    const messages = events.filter((e) => e.event === "message").map((e) => [e.data.role, e.data.content[0].text]);
    expect(messages).toEqual([
      ["user", "hello from the package"],
      ["assistant", "hello from the package"],
    ]);
    expect(events.find((e) => e.event === "run" && e.data.status === "ok")).toBeDefined();

    // A finished run's stream replays its reply and ends with its status.
    const runEvents: string[] = [];
    for await (const e of sb.watchRun(accepted.runId)) runEvents.push(e.event);
    expect(runEvents).toEqual(["delta", "status"]);

    const list = await sb.listSessions({ agentId: "main", limit: 1000 });
    expect(list.sessions.map((s) => s.key)).toContain(key);
    await expect(new SwitchboardClient({ baseUrl: base, token: "wrong" }).agents()).rejects.toBeInstanceOf(
      SwitchboardApiError,
    );
  });

  it("the AI SDK's MCP client lists the tools, spawns a sub-agent and talks to it with sessions_send", async () => {
    const mcp = await createMCPClient({ transport: { type: "http", url: `${base}/mcp`, headers: headers() } });
    try {
      const tools = await mcp.tools();
      expect(Object.keys(tools).sort()).toEqual([
        "agents_list",
        "session_status",
        "sessions_history",
        "sessions_list",
        "sessions_search",
        "sessions_send",
        "sessions_spawn",
        "sessions_yield",
        "subagents",
      ]);
      const call = async (name: string, args: Record<string, unknown>) => {
        const r = (await tools[name].execute(args, { toolCallId: name, messages: [] } as never)) as {
          structuredContent?: any;
          isError?: boolean;
        };
        expect(r.isError, JSON.stringify(r)).toBeFalsy();
        return r.structuredContent;
      };
      const spawned = await call("sessions_spawn", { task: "wait for instructions" });
      expect(spawned).toMatchObject({
        status: "accepted",
        childSessionKey: expect.stringMatching(/^agent:main:subagent:/),
      });
      // The default visibility ("tree") lets a session talk to its own sub-agents.
      const sent = await call("sessions_send", {
        sessionKey: spawned.childSessionKey,
        message: "ping over MCP",
        timeoutSeconds: 20,
      });
      expect(sent).toMatchObject({ status: "ok", sessionKey: spawned.childSessionKey });
      expect(sent.reply).toMatch(/ping over MCP$/);
    } finally {
      await mcp.close();
    }
  });

  it("the OpenAI Agents SDK's MCPServerStreamableHttp connects with the bearer token and calls the tools", async () => {
    const server = new MCPServerStreamableHttp({
      url: `${base}/mcp`,
      name: "switchboard",
      requestInit: { headers: headers() },
      clientSessionTimeoutSeconds: 60, // a waiting sessions_send can take up to 50 s over MCP
    });
    await server.connect();
    try {
      const tools = await server.listTools();
      expect(tools.map((t) => t.name)).toContain("sessions_spawn");
      const listed = await server.callTool("sessions_list", { limit: 5 });
      expect(listed[0]?.type).toBe("text");
      expect(JSON.parse((listed[0] as unknown as { text: string }).text)).toMatchObject({ count: expect.any(Number) });
      const spawned = await server.callTool("sessions_spawn", { task: "count to three" });
      expect(JSON.parse((spawned[0] as unknown as { text: string }).text)).toMatchObject({ status: "accepted" });
    } finally {
      await server.close();
    }
  });

  it("the .mcp.json-style configs of docs/clients.md and README.md, read as a host reads them, connect and call the tools", async () => {
    // Each page's JSON block with its URL's path on this Worker (docs/clients.md's host is a placeholder,
    // <your-subdomain>) and ${SWITCHBOARD_TOKEN} expanded from the environment, as hosts that expand variables do.
    const blockOf = (file: string) =>
      [...readFileSync(file, "utf8").matchAll(/```json\n([\s\S]*?)```/g)]
        .map((m) => m[1])
        .find((b) => b.includes('"mcpServers"'));
    for (const file of ["docs/clients.md", "README.md"]) {
      const block = blockOf(file);
      expect(block, file).toBeDefined();
      const server = JSON.parse(block!).mcpServers.switchboard;
      expect(server.type, file).toBe("http");
      const env: Record<string, string> = { SWITCHBOARD_TOKEN: TOKEN };
      const headers = Object.fromEntries(
        Object.entries(server.headers as Record<string, string>).map(([k, v]) => [
          k,
          v.replace(/\$\{(\w+)\}/g, (_, name) => env[name]),
        ]),
      );
      const url = new URL(/^https?:\/\/[^/]+(\/.*)$/.exec(server.url)![1], base);
      const client = new Client({ name: "mcp-json-host", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name)).toContain("sessions_list");
        const listed = await client.callTool({ name: "sessions_list", arguments: { limit: 1 } });
        expect(listed.isError, file).toBeFalsy();
        expect(listed.structuredContent).toMatchObject({ count: expect.any(Number) });
      } finally {
        await client.close();
      }
    }
  });

  it("a wrong token is refused with 401 over MCP", async () => {
    const res = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { Authorization: "Bearer wrong", "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(401);
  });

  it('the official A2A client (docs/clients.md, "A2A") over real HTTP: the card, a send, a stream to its end, and the same id over REST', async () => {
    const fetchImpl: typeof fetch = (input, init) => {
      const req = new Request(input, init);
      req.headers.set("Authorization", `Bearer ${TOKEN}`);
      return fetch(req);
    };
    const client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }).createFromUrl(`${base}/a2a/main/`);
    const message = (text: string, contextId?: string) =>
      SendMessageRequest.fromJSON({
        message: { messageId: randomBytes(8).toString("hex"), role: "ROLE_USER", parts: [{ text }], contextId },
      });
    const task = await client.sendMessage(message("hello over http"));
    if (!("id" in task)) throw new Error("expected a task");
    expect(task.artifacts[0].parts[0].content).toEqual({ $case: "text", value: "hello over http" });
    const run = (await (await fetch(`${base}/v1/runs/${task.id}`, { headers: headers() })).json()) as {
      status: string;
      sessionKey: string;
    };
    expect([run.status, run.sessionKey]).toEqual(["ok", `agent:main:${task.contextId}`]);
    const cases: string[] = [];
    for await (const e of client.sendMessageStream(message("and streamed", task.contextId)))
      cases.push(e.payload!.$case);
    expect(cases[0]).toBe("task");
    expect(cases.at(-1)).toBe("statusUpdate");
    expect(cases).toContain("artifactUpdate");
  });
});

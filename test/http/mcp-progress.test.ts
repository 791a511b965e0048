import { exports } from "cloudflare:workers";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { MCP_PROGRESS } from "../../src/http/mcp-progress";
import { useFakeProvider } from "../helpers/fake-provider";
import { GATEWAY, sendAndWait } from "../helpers/http";
import { SseReader } from "../helpers/sse";

const DEFAULT_INTERVAL = MCP_PROGRESS.intervalMs;
afterEach(() => {
  MCP_PROGRESS.intervalMs = DEFAULT_INTERVAL;
});

const visibleSiblings = { tools: { sessions: { visibility: "agent" } } };

function mcpCall(requester: string, args: Record<string, unknown>, meta?: Record<string, unknown>) {
  return exports.default.fetch("https://switchboard.test/mcp", {
    method: "POST",
    headers: {
      Authorization: `Bearer ${GATEWAY}`,
      "X-Session-Key": requester,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "sessions_send", arguments: args, ...(meta ? { _meta: meta } : {}) },
    }),
  });
}

describe("MCP progress while sessions_send waits", () => {
  it("answers as SSE: progress notifications with the client's token while the reply is pending, then the result", async () => {
    MCP_PROGRESS.intervalMs = 20;
    const fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = "agent:main:mcp-progress-req";
    const target = "agent:main:mcp-progress-target";
    const res = await mcpCall(
      requester,
      { sessionKey: target, message: "ping", timeoutSeconds: 30 },
      { progressToken: "tok-1" },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const sse = new SseReader(res.body!.getReader());
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    const progress = [await sse.next(), await sse.next()].map((e) => JSON.parse(e!.data));
    expect(progress.map((p) => [p.method, p.params.progressToken, p.params.progress])).toEqual([
      ["notifications/progress", "tok-1", 1],
      ["notifications/progress", "tok-1", 2],
    ]);
    expect(progress[0].params.message).toMatch(/^sessions_send: still waiting \(\d+ s of at most 30 s\)$/);
    fake.pending()[0].reply("pong");
    const rest = (await sse.rest()).map((e) => JSON.parse(e.data));
    const final = rest.at(-1);
    expect(rest.slice(0, -1).every((m) => m.method === "notifications/progress")).toBe(true);
    expect(final).toMatchObject({
      jsonrpc: "2.0",
      id: 7,
      result: { structuredContent: { status: "ok", reply: "pong" } },
    });
  });

  it("the official SDK client's onprogress receives them", async () => {
    MCP_PROGRESS.intervalMs = 20;
    const fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = "agent:main:mcp-progress-sdk";
    const target = "agent:main:mcp-progress-sdk-target";
    const transport = new StreamableHTTPClientTransport(new URL("https://switchboard.test/mcp"), {
      requestInit: { headers: { Authorization: `Bearer ${GATEWAY}`, "X-Session-Key": requester } },
      fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
    });
    const client = new Client({ name: "switchboard-test", version: "1.0.0" });
    await client.connect(transport);
    const seen: { progress: number; message?: string }[] = [];
    const result = client.callTool(
      { name: "sessions_send", arguments: { sessionKey: target, message: "hi", timeoutSeconds: 20 } },
      undefined,
      {
        onprogress: (p) => seen.push(p),
      },
    );
    // Calls left by an earlier test's agent-to-agent steps may be pending too: answer the one for this send.
    const mine = () => fake.pending().find((call) => call.lastUser.endsWith("\nhi"));
    await vi.waitFor(() => expect(mine()).toBeDefined());
    await vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(2));
    mine()!.reply("hello back");
    expect((await result).structuredContent).toMatchObject({ status: "ok", reply: "hello back" });
    expect(seen.slice(0, 2).map((p) => p.progress)).toEqual([1, 2]);
    await client.close();
  });

  it("the SDK's v2 client on the current revision (2026-07-28) receives them too", async () => {
    MCP_PROGRESS.intervalMs = 20;
    const fake = useFakeProvider({ extraConfig: visibleSiblings });
    const requester = "agent:main:mcp-progress-modern";
    const target = "agent:main:mcp-progress-modern-target";
    const client = new ModernClient(
      { name: "switchboard-test", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await client.connect(
      new ModernTransport(new URL("https://switchboard.test/mcp"), {
        requestInit: { headers: { Authorization: `Bearer ${GATEWAY}`, "X-Session-Key": requester } },
        fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
      }),
    );
    const seen: { progress: number }[] = [];
    const result = client.callTool(
      { name: "sessions_send", arguments: { sessionKey: target, message: "modern hi", timeoutSeconds: 20 } },
      { onprogress: (p) => seen.push(p) },
    );
    const mine = () => fake.pending().find((call) => call.lastUser.endsWith("\nmodern hi"));
    await vi.waitFor(() => expect(mine()).toBeDefined());
    await vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(2));
    mine()!.reply("hello modern");
    expect((await result).structuredContent).toMatchObject({ status: "ok", reply: "hello modern" });
    expect(seen.slice(0, 2).map((p) => p.progress)).toEqual([1, 2]);
    await client.close();
  });

  it("without a progressToken, or with no wait, the answer stays one JSON body", async () => {
    setConfigOverride({ agents: { list: [{ id: "main", default: true }] }, ...visibleSiblings });
    const target = "agent:main:mcp-progress-plain";
    await sendAndWait(target, "exists");
    const plain = await mcpCall("agent:main:mcp-progress-r", { sessionKey: target, message: "a", timeoutSeconds: 5 });
    expect(plain.headers.get("content-type")).toContain("application/json");
    expect((await plain.json()) as object).toMatchObject({ id: 7, result: { structuredContent: { status: "ok" } } });
    const noWait = await mcpCall(
      "agent:main:mcp-progress-r",
      { sessionKey: target, message: "b", timeoutSeconds: 0 },
      { progressToken: 3 },
    );
    expect(noWait.headers.get("content-type")).toContain("application/json");
    expect((await noWait.json()) as object).toMatchObject({ result: { structuredContent: { status: "accepted" } } });
  });
});

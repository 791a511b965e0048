import { exports } from "cloudflare:workers";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from "@modelcontextprotocol/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { MCP_CURRENT_REVISION } from "../../src/http/mcp-guard";
import { TASKS_EXTENSION } from "../../src/http/mcp-tasks";
import { GATEWAY } from "./http";

/**
 * The SDKs' own MCP clients against the Worker, for MCP tasks (docs/protocols.md, "MCP tasks"): the v1 client
 * speaks protocol 2025-11-25's tasks; the v2 client pinned to 2026-07-28 declares the tasks extension.
 */

export async function v1Client(requester: string, token = GATEWAY): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL("https://switchboard.test/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, "X-Session-Key": requester } },
    fetch: (input, init) => exports.default.fetch(input instanceof Request ? input : String(input), init),
  });
  const client = new Client({ name: "switchboard-tasks-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/** A task-augmented tools/call (2025-11-25): answered with `{task}`. */
export function taskCall(client: Client, name: string, args: Record<string, unknown>) {
  return client.request(
    { method: "tools/call", params: { name, arguments: args, task: { ttl: 60_000 } } },
    CreateTaskResultSchema,
  );
}

/**
 * A v2 client pinned to 2026-07-28 that declares the extension; the raw JSON answers it receives are kept in
 * `seen`, the requests it sends (as `Request`s, unread) in `sent`.
 */
export async function modernClient(requester: string, declare = true) {
  const seen: unknown[] = [];
  const sent: Request[] = [];
  const transport = new ModernTransport(new URL("https://switchboard.test/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${GATEWAY}`, "X-Session-Key": requester } },
    fetch: async (input, init) => {
      sent.push(new Request(input instanceof Request ? input : String(input), init));
      const res = await exports.default.fetch(input instanceof Request ? input : String(input), init);
      if (res.headers.get("content-type")?.includes("application/json")) seen.push(await res.clone().json());
      return res;
    },
  });
  const client = new ModernClient(
    { name: "switchboard-tasks-2026", version: "1.0.0" },
    {
      versionNegotiation: { mode: { pin: MCP_CURRENT_REVISION } },
      capabilities: declare ? { extensions: { [TASKS_EXTENSION]: {} } } : {},
    },
  );
  await client.connect(transport);
  return { client, seen, sent };
}

/**
 * Start a task-augmented sessions_spawn with the 2026 client: the SDK's v2 client has no task runtime and
 * refuses the `resultType: "task"` answer, which is read from the wire instead. Answers the task id.
 */
export async function modernSpawnTask(
  m: Awaited<ReturnType<typeof modernClient>>,
  args: Record<string, unknown>,
): Promise<string> {
  await m.client.callTool({ name: "sessions_spawn", arguments: args }).then(
    () => {
      throw new Error("expected a task answer");
    },
    (err: unknown) => {
      if (!String(err).includes("Unsupported result type 'task'")) throw err;
    },
  );
  return (m.seen.at(-1) as { result: { taskId: string } }).result.taskId;
}

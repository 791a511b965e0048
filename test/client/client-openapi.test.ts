import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { SwitchboardApiError, SwitchboardClient } from "../../src/client/index";
import { A2A_REST_OPERATIONS, Contract, type Doc } from "../helpers/contract";
import { call, GATEWAY } from "../helpers/http";

/**
 * The typed client (src/client/, the `switchboard/client` package entry) checked against /openapi.json: every
 * request it makes is a documented operation, every answer it receives matches the documented schema of
 * that operation and status, and every documented operation is either wrapped by the client or named below
 * as left to plain HTTP — so a route added to the API without a client method (or a reason) fails here.
 */

/** Documented operations the client does not wrap, and why. */
const NOT_IN_CLIENT: Record<string, string> = {
  "GET /healthz": "a probe for load balancers and deploys",
  "GET /openapi.json": "the document itself",
  "GET /docs": "a page for people",
  "POST /mcp": "MCP clients speak it (docs/clients.md)",
  "GET /.well-known/mcp/server-card.json": "MCP discovery, read by MCP clients and registries (docs/protocols.md)",
  "GET /mcp/server-card": "MCP discovery, read by MCP clients and registries (docs/protocols.md)",
  "GET /.well-known/mcp/catalog.json": "MCP discovery, read by MCP clients and registries (docs/protocols.md)",
  "POST /a2a/{agentId}": 'A2A clients speak it (docs/clients.md, "A2A")',
  "GET /a2a/{agentId}/.well-known/agent-card.json": "A2A discovery, read by A2A clients (docs/protocols.md)",
  "GET /.well-known/agent-card.json": "A2A discovery, read by A2A clients (docs/protocols.md)",
  // A2A's HTTP+JSON binding: the A2A SDK's REST transport speaks it (docs/protocols.md, "HTTP+JSON binding").
  ...Object.fromEntries(A2A_REST_OPERATIONS.map((op) => [op, 'A2A clients speak it (docs/clients.md, "A2A")'])),
  "GET /v1/sessions/{key}/transcript.jsonl": "a download (JSON lines), fetched as a file",
  "GET /v1/sessions/{key}/attachments": "attachments are read by the runtimes they were sent to",
  "GET /v1/sessions/{key}/attachments/{name}": "a file download",
  "GET /v1/sessions/{key}/deliveries": "operator work, done in the console",
  "POST /v1/sessions/{key}/deliveries/{id}/retry": "operator work, done in the console",
  "GET /v1/sessions/{key}/timers/dead": "operator work, done in the console",
  "POST /v1/sessions/{key}/timers/dead/{kind}/{ref}/retry": "operator work, done in the console",
  "GET /v1/config": "operator work, done in the console",
  "GET /v1/sessions/{key}/runs": "the console's runs tab",
};

async function documentWith(): Promise<{ contract: Contract; templates: [RegExp, string][] }> {
  const doc = (await call("GET", "/openapi.json", undefined, { token: null })).json as Doc;
  const templates = Object.keys(doc.paths).map(
    (p) => [new RegExp(`^${p.replace(/\{[^}]+\}/g, "[^/]+")}$`), p] as [RegExp, string],
  );
  return { contract: new Contract(doc), templates };
}

describe("typed client against /openapi.json", () => {
  it("every request is a documented operation and every answer matches its documented schema", async () => {
    const { contract, templates } = await documentWith();
    const used = new Set<string>();
    const checkedFetch = async (input: string, init?: RequestInit) => {
      const res = await exports.default.fetch(input, init);
      const path = new URL(input).pathname;
      const template = templates.find(([re]) => re.test(path))?.[1];
      const op = `${init?.method ?? "GET"} ${template ?? path}`;
      used.add(op);
      if (res.headers.get("Content-Type")?.startsWith("text/event-stream")) {
        expect(contract.doc.paths[template ?? path]?.get, `${op} is documented`).toBeDefined();
        return res;
      }
      const text = await res.clone().text();
      let json: unknown = text;
      try {
        json = JSON.parse(text);
      } catch {}
      contract.check(op, { status: res.status, json, headers: res.headers, text });
      return res;
    };
    const key = `agent:main:client-doc-${crypto.randomUUID().slice(0, 8)}`;
    const sb = new SwitchboardClient({ baseUrl: "https://switchboard.test", token: GATEWAY, fetch: checkedFetch });

    const accepted = await sb.sendMessage(key, { message: "checked" });
    await sb.waitRun(accepted.runId, 10_000);
    await sb.getRun(accepted.runId);
    await sb.getSession(key);
    await sb.patchSession(key, { label: "checked" });
    await sb.history(key, { limit: 5 });
    await sb.sessionTree(key);
    await sb.listSessions({ agentId: "main", limit: 5 });
    await sb.agents();
    await sb.tools();
    await sb.sessionsList({ limit: 5 });
    await sb.as(key).sessionsHistory({ sessionKey: key });
    await sb.sessionsSpawn({ task: "checked task" });
    const { tasks } = await sb.listTasks("main", { limit: 5 });
    await sb.getTask(tasks[0].taskId);
    await sb.cancelTask(tasks[0].taskId);
    await sb.auditTasks("main");
    await sb.agentsList();
    await sb.abortRun(accepted.runId); // an ended run: answered as it is
    // Only the run's own token may complete it: the operator's is refused with a documented 403.
    await expect(sb.completeRun(accepted.runId, { reply: "x" })).rejects.toBeInstanceOf(SwitchboardApiError);
    await expect(sb.heartbeatRun(accepted.runId)).rejects.toBeInstanceOf(SwitchboardApiError);
    for await (const e of sb.watchRun(accepted.runId)) expect(["delta", "status"]).toContain(e.event);
    for await (const e of sb.watchSession(key, { lastEventId: "0" })) if (e.event === "message") break;
    await sb.sessionsSend({ sessionKey: key, message: "again", timeoutSeconds: 0 });
    await sb.deleteSession(key);

    const documented = contract.operations();
    const uncovered = documented.filter((op) => !used.has(op) && !(op in NOT_IN_CLIENT));
    expect(uncovered, "documented operations neither wrapped by the client nor listed in NOT_IN_CLIENT").toEqual([]);
    expect([...used].filter((op) => !documented.includes(op))).toEqual([]);
    // The exclusions name real operations (a renamed route must be renamed here too).
    expect(Object.keys(NOT_IN_CLIENT).filter((op) => !documented.includes(op))).toEqual([]);
  });
});

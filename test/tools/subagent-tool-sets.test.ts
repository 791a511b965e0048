import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call, GATEWAY, invoke } from "../helpers/http";
import { installFakes, releaseAndSettleChildren, subagentConfig } from "../helpers/subagents";

afterEach(releaseAndSettleChildren);

describe("sub-agent tool restriction (enforced by the gateway)", () => {
  it("a sub-agent session gets 404 for session tools over /tools/invoke unless tools.subagents.tools allows them", async () => {
    setConfigOverride(subagentConfig());
    installFakes(() => "ok");
    const child = (await invoke("sessions_spawn", { task: "t" })).details.childSessionKey;
    for (const tool of [
      "sessions_spawn",
      "sessions_list",
      "sessions_history",
      "sessions_search",
      "sessions_send",
      "agents_list",
    ]) {
      const r = await invoke(tool, { task: "x", sessionKey: "main", message: "m" }, { sessionKey: child });
      expect(r.status).toBe(404);
      expect(r.body.error).toEqual({ type: "not_found", message: `Tool not available for this session: ${tool}` });
    }
    // sessions_yield is every sub-agent's: over HTTP it is offered, and refuses for want of a model turn to end.
    expect((await invoke("sessions_yield", {}, { sessionKey: child })).details).toEqual({
      status: "error",
      error: "Yield not supported in this context",
    });
    setConfigOverride(subagentConfig({ tools: { subagents: { tools: { allow: ["sessions_list"] } } } }));
    expect((await invoke("sessions_list", {}, { sessionKey: child })).status).toBe(200);
    expect((await invoke("sessions_spawn", { task: "x" }, { sessionKey: child })).status).toBe(404);
  });

  it("with maxSpawnDepth 2 an orchestrator keeps sessions_spawn/list/history by default, its leaf children get none; deny wins", async () => {
    const notAvailable = (tool: string) => ({
      type: "not_found",
      message: `Tool not available for this session: ${tool}`,
    });
    setConfigOverride(subagentConfig({ subagents: { maxSpawnDepth: 2 } }));
    installFakes(() => "ok");
    const orchestrator = (await invoke("sessions_spawn", { task: "t" })).details.childSessionKey;
    expect((await invoke("sessions_list", {}, { sessionKey: orchestrator })).status).toBe(200);
    expect((await invoke("sessions_history", { sessionKey: orchestrator }, { sessionKey: orchestrator })).status).toBe(
      200,
    );
    expect((await invoke("sessions_search", { query: "t" }, { sessionKey: orchestrator })).status).toBe(200);
    const leaf = await invoke("sessions_spawn", { task: "leaf work" }, { sessionKey: orchestrator });
    expect(leaf.details).toMatchObject({ status: "accepted" });
    for (const tool of ["sessions_send", "agents_list"]) {
      expect(
        (await invoke(tool, { sessionKey: "main", message: "m" }, { sessionKey: orchestrator })).body.error,
      ).toEqual(notAvailable(tool));
    }
    // The depth-2 child is a leaf: no session tool but sessions_yield, over /tools/invoke and in its MCP tool list.
    const leafKey = leaf.details.childSessionKey;
    for (const tool of ["sessions_spawn", "sessions_list", "sessions_history", "sessions_search", "subagents"]) {
      expect((await invoke(tool, { task: "x", sessionKey: leafKey }, { sessionKey: leafKey })).body.error).toEqual(
        notAvailable(tool),
      );
    }
    const list = await exports.default.fetch("https://sb.test/mcp", {
      method: "POST",
      headers: {
        Authorization: `Bearer ${GATEWAY}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "X-Session-Key": orchestrator,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    // What an orchestrator (depth 1 of 2) may call, over MCP and in the runtime catalog alike.
    const orchestratorTools = [
      "sessions_history",
      "sessions_list",
      "sessions_search",
      "sessions_spawn",
      "sessions_yield",
      "subagents",
    ];
    expect(((await list.json()) as any).result.tools.map((t: any) => t.name).sort()).toEqual(orchestratorTools);
    // The tool catalog a runtime offers its model matches what the gateway allows, at each depth.
    const catalog = async (key: string) =>
      (await call("GET", "/v1/tools", undefined, { headers: { "X-Session-Key": key } })).json.tools
        .map((t: any) => t.name)
        .sort();
    expect(await catalog(orchestrator)).toEqual(orchestratorTools);
    // Every sub-agent keeps sessions_yield, a leaf too (as in OpenClaw): it has no other session tool.
    expect(await catalog(leafKey)).toEqual(["sessions_yield"]);

    setConfigOverride(
      subagentConfig({
        subagents: { maxSpawnDepth: 2 },
        tools: { subagents: { tools: { deny: ["sessions_spawn"] } } },
      }),
    );
    expect((await invoke("sessions_spawn", { task: "x" }, { sessionKey: orchestrator })).body.error).toEqual(
      notAvailable("sessions_spawn"),
    );
  });
});

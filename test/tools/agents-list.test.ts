import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { invoke, RESEARCH_TOKEN } from "../helpers/http";

const agentsList = (sessionKey = "agent:main:main", token?: string) =>
  invoke("agents_list", {}, { sessionKey, ...(token ? { token } : {}) });

describe("agents_list", () => {
  it("default: only the requester agent", async () => {
    const r = await agentsList();
    expect(r.status).toBe(200);
    expect(r.details).toEqual({
      requester: "main",
      allowAny: false,
      agents: [{ id: "main", name: "Main", configured: true }],
    });
    expect(JSON.parse(r.body.result.content[0].text)).toEqual(r.details);
  });

  it("the requester is the agent of the requester session (or of the token)", async () => {
    expect((await agentsList("agent:research:main")).details.requester).toBe("research");
    expect((await agentsList("main", RESEARCH_TOKEN)).details).toEqual({
      requester: "research",
      allowAny: false,
      agents: [{ id: "research", name: "Research", configured: true }],
    });
  });

  it("per-agent allowlist: requester first, the rest sorted; ids normalised; unconfigured ids are configured:false", async () => {
    setConfigOverride({
      agents: {
        list: [
          {
            id: "main",
            name: "Main",
            default: true,
            subagents: { allowAgents: ["Research", " zeta ", "coder", "main", "research"] },
          },
          { id: "research", name: "Research" },
          { id: "coder", name: "  " },
        ],
      },
    });
    expect((await agentsList()).details).toEqual({
      requester: "main",
      allowAny: false,
      agents: [
        { id: "main", name: "Main", configured: true },
        { id: "coder", configured: true },
        { id: "research", name: "Research", configured: true },
        { id: "zeta", configured: false },
      ],
    });
  });

  it("falls back to agents.defaults.subagents.allowAgents", async () => {
    setConfigOverride({
      agents: {
        defaults: { subagents: { allowAgents: ["research"] } },
        list: [{ id: "main", default: true }, { id: "research" }],
      },
    });
    expect((await agentsList()).details.agents.map((a: any) => a.id)).toEqual(["main", "research"]);
    // A per-agent list wins over the defaults (here: an empty one).
    setConfigOverride({
      agents: {
        defaults: { subagents: { allowAgents: ["research"] } },
        list: [{ id: "main", default: true, subagents: { allowAgents: [] } }, { id: "research" }],
      },
    });
    expect((await agentsList()).details.agents.map((a: any) => a.id)).toEqual(["main"]);
  });

  it('"*" allows every configured agent', async () => {
    setConfigOverride({
      agents: {
        list: [{ id: "main", default: true, subagents: { allowAgents: ["*"] } }, { id: "research" }, { id: "coder" }],
      },
    });
    expect((await agentsList()).details).toEqual({
      requester: "main",
      allowAny: true,
      agents: [
        { id: "main", configured: true },
        { id: "coder", configured: true },
        { id: "research", configured: true },
      ],
    });
  });

  it("sub-agents cannot call it (404, the tool is not in their set)", async () => {
    const r = await agentsList("agent:main:subagent:0b7c1f7e-8c51-4b5c-9d6a-2f1f2b1c3d4e");
    expect(r.status).toBe(404);
    expect(r.body.error.message).toBe("Tool not available for this session: agents_list");
  });
});

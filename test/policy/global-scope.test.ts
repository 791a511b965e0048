import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { SessionObject } from "../../src/session/session-object";
import { call, enc, invoke, sessionStub } from "../helpers/http";
import { installFakes, settle, subagentConfig } from "../helpers/subagents";

/** Under session.scope = "global" the DM bucket is the object `global`, and nobody ever reads that name. */

const GLOBAL_WORD = /\bglobal\b/;

/** Every raw request body the fakes receive (model calls and channel webhooks). */
function recordBodies(): string[] {
  const bodies: string[] = [];
  const spy = globalThis.fetch as unknown as {
    getMockImplementation(): (i: any, init?: any) => Promise<Response>;
    mockImplementation(f: unknown): void;
  };
  const inner = spy.getMockImplementation();
  spy.mockImplementation(async (input: any, init?: any) => {
    bodies.push(typeof init?.body === "string" ? init.body : "");
    return inner(input, init);
  });
  return bodies;
}

async function storedMessages(key: string): Promise<string[]> {
  return runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) =>
    state.storage.sql
      .exec<{ json: string }>("SELECT json FROM messages ORDER BY seq")
      .toArray()
      .map((r) => r.json),
  );
}

describe('session.scope = "global"', () => {
  it("the global bucket reads as main in rows, transcriptPath, runs, spawnedBy, provenance, prompts and deliveries", async () => {
    setConfigOverride(
      subagentConfig({
        session: { scope: "global", agentToAgent: { maxPingPongTurns: 0 } },
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      }),
    );
    const fakes = installFakes((c) =>
      c.step === "announce"
        ? "ANNOUNCE_SKIP"
        : c.step === "task"
          ? "child result"
          : c.system.includes("announce step")
            ? "ANNOUNCE_SKIP"
            : "hello back",
    );
    const bodies = recordBodies();
    const responses: unknown[] = [];
    const seen = <T>(r: T): T => {
      responses.push(r);
      return r;
    };

    // An inbound DM with a delivery route: accepted, run and delivered as `main`.
    const sent = seen(
      await call("POST", "/v1/sessions/main/messages", { message: "hi", channel: "webchat", to: "u1", deliver: true }),
    );
    expect(sent.json).toMatchObject({ status: "accepted", sessionKey: "main" });
    const run = seen(await call("GET", `/v1/runs/${sent.json.runId}/wait?timeoutMs=10000`)).json;
    expect(run).toMatchObject({ sessionKey: "main", status: "ok", reply: "hello back" });
    expect(seen(await call("GET", `/v1/runs/${sent.json.runId}`)).json.sessionKey).toBe("main");
    await vi.waitFor(() => expect(fakes.hooks).toHaveLength(1), { timeout: 5000, interval: 10 });
    expect(fakes.hooks[0].body).toMatchObject({ sessionKey: "main", kind: "reply", message: "hello back" });

    // The row and its transcriptPath, which is fetchable and names the session `main`.
    const row = seen(await call("GET", "/v1/sessions/main")).json;
    expect(row).toMatchObject({ key: "main", transcriptPath: "/v1/sessions/main/transcript.jsonl" });
    const jsonl = seen(await call("GET", row.transcriptPath));
    expect(jsonl.status).toBe(200);
    expect(JSON.parse(String(jsonl.json).split("\n")[0])).toMatchObject({ type: "session", key: "main" });

    // A sub-agent spawned from it: spawnedBy, its prompts and its stored provenance say `main`.
    const spawned = seen(await invoke("sessions_spawn", { task: "dig" }, { sessionKey: "main" })).details;
    expect(spawned.status).toBe("accepted");
    const child = spawned.childSessionKey as string;
    await settle(child);
    expect(seen(await call("GET", `/v1/sessions/${enc(child)}`)).json).toMatchObject({ key: child, spawnedBy: "main" });
    const task = fakes.model.find((c) => c.step === "task")!;
    expect(task.system).toContain("- Requester session: main.");
    expect(task.lastUser).toMatch(/^\[Inter-session message\] sourceSession=main /);
    expect(fakes.model.find((c) => c.step === "announce")!.system).toContain("Requester session: main.");
    const childTask = JSON.parse((await storedMessages(child))[0]);
    expect(childTask.provenance).toEqual({
      kind: "inter_session",
      sourceSessionKey: "main",
      sourceChannel: "webchat",
      sourceTool: "sessions_spawn",
    });
    // Tree visibility still finds the child from the global bucket (the index keeps the real name).
    const list = seen(await invoke("sessions_list", {}, { sessionKey: "main" })).details;
    expect(list.sessions.find((s: any) => s.key === child)).toMatchObject({ spawnedBy: "main" });

    // Agent-to-agent: the target's prompt and stored provenance name the requester `main`.
    const target = "agent:research:main";
    const a2a = seen(
      await invoke(
        "sessions_send",
        { sessionKey: target, message: "ping", timeoutSeconds: 10 },
        { sessionKey: "main" },
      ),
    ).details;
    expect(a2a).toMatchObject({ status: "ok", sessionKey: target });
    const primary = fakes.model.find((c) => c.system.includes("Agent-to-agent message context:"))!;
    expect(primary.system).toContain("Agent 1 (requester) session: main.");
    const targetUser = (await storedMessages(target)).map((j) => JSON.parse(j)).find((m) => m.role === "user");
    expect(targetUser.provenance).toMatchObject({
      kind: "inter_session",
      sourceSessionKey: "main",
      sourceTool: "sessions_send",
    });
    const history = seen(
      await invoke("sessions_history", { sessionKey: target, includeTools: true }, { sessionKey: "main" }),
    ).details;
    expect(history.messages[0].provenance.sourceSessionKey).toBe("main");

    // The class-level check: not one request a model or channel received, nor one response, names `global`.
    expect(bodies.length).toBeGreaterThan(4);
    for (const b of bodies) expect(b).not.toMatch(GLOBAL_WORD);
    for (const r of responses) expect(JSON.stringify(r)).not.toMatch(GLOBAL_WORD);
    for (const m of [...(await storedMessages(child)), ...(await storedMessages(target))])
      expect(m).not.toMatch(GLOBAL_WORD);
  });
});

import { afterEach, describe, expect, it, vi } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import type { WebhookRunRequest } from "../../src/runners/webhook-runner";
import { useFakeProvider } from "../helpers/fake-provider";
import { call, invoke } from "../helpers/http";
import { settleChildren } from "../helpers/subagents";

/** Every accepted sessions_spawn parameter takes effect, or is refused by name (docs/subagents.md). */

afterEach(async () => {
  await settleChildren();
});

const RUNTIME_URL = "https://runtime.test/spawned";
const waitRun = async (runId: string) => (await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json;

describe("sessions_spawn refuses what it would not honour", () => {
  it("an unknown parameter is a 400 naming it; nothing is spawned", async () => {
    const fake = useFakeProvider({ auto: (c) => c.reply("x") });
    const r = await invoke("sessions_spawn", { task: "t", priority: "high" });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      ok: false,
      error: { type: "invalid_request", message: "priority: unknown parameter for sessions_spawn" },
    });
    // Channel-delivery keys keep OpenClaw's pointer to the right tool.
    const ch = await invoke("sessions_spawn", { task: "t", reply_to: "x" });
    expect(ch.body.error.message).toBe(
      'sessions_spawn does not support "replyTo". Use "message" or "sessions_send" for channel delivery.',
    );
    expect(fake.calls).toHaveLength(0);
  });

  it('runtime "acp" and the ACP-only parameters are a clear "not supported" error; lightContext is accepted', async () => {
    const fake = useFakeProvider({ auto: (c) => c.reply("done") });
    expect((await invoke("sessions_spawn", { task: "t", runtime: "acp" })).details).toEqual({
      status: "error",
      error:
        'runtime="acp" is not supported by Switchboard: sub-agents run with runtime="subagent" (omit runtime). Use agents_list to find agents to spawn.',
    });
    expect((await invoke("sessions_spawn", { task: "t", streamTo: "parent" })).details).toEqual({
      status: "error",
      error: "streamTo is only supported for runtime=acp; got runtime=subagent",
    });
    expect((await invoke("sessions_spawn", { task: "t", resume_session_id: "abc" })).details.error).toBe(
      "resumeSessionId is only supported for runtime=acp; got runtime=subagent",
    );
    expect(fake.calls).toHaveLength(0);
    const ok = await invoke("sessions_spawn", { task: "t", runtime: "subagent", lightContext: true });
    expect(ok.details).toMatchObject({ status: "accepted", modelApplied: true });
  });
});

describe("thinking and model reach the child", () => {
  it("thinking reaches a built-in model child as reasoning_effort; the configured subagents.thinking is the default", async () => {
    const fake = useFakeProvider({
      auto: (c) => c.reply("done"),
      extraConfig: {
        agents: {
          defaults: { subagents: { thinking: "low" } },
          list: [{ id: "main", default: true, model: "fake/m1" }],
        },
      },
    });
    const a = await invoke("sessions_spawn", { task: "explicit", thinking: "XHIGH" });
    expect(a.details).toMatchObject({ status: "accepted", modelApplied: true });
    await waitRun(a.details.runId);
    const b = await invoke("sessions_spawn", { task: "defaulted" });
    await waitRun(b.details.runId);
    const task = (t: string) => fake.calls.find((c) => c.lastUser.includes(`[Subagent Task]: ${t}`))!.body;
    expect(task("explicit").reasoning_effort).toBe("high");
    expect(task("defaulted").reasoning_effort).toBe("low");
    expect(
      (await call("GET", `/v1/sessions/${encodeURIComponent(a.details.childSessionKey)}`)).json.thinkingLevel,
    ).toBe("xhigh");
    expect((await invoke("sessions_spawn", { task: "t", thinking: "maximum" })).details).toEqual({
      status: "error",
      error:
        'Invalid thinking level "maximum". Use one of: off, minimal, low, medium, high, xhigh, adaptive, max, ultra.',
    });
  });

  it("a webhook runtime receives model and thinking in its run request; modelApplied is false (the runtime decides)", async () => {
    const received: WebhookRunRequest[] = [];
    setConfigOverride({
      agents: {
        list: [
          { id: "main", default: true, subagents: { allowAgents: ["hook"] } },
          { id: "hook", model: "builtin/echo", runtime: { type: "webhook", url: RUNTIME_URL } },
        ],
      },
    });
    const realFetch = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input);
      if (!url.startsWith(RUNTIME_URL)) return realFetch(input, init);
      received.push(JSON.parse(String(init?.body)));
      return Response.json({ reply: "ok" });
    });
    const r = await invoke("sessions_spawn", { task: "t", agentId: "hook", thinking: "medium" });
    expect(r.details).toMatchObject({ status: "accepted", modelApplied: false });
    await waitRun(r.details.runId);
    expect(received[0]).toMatchObject({
      type: "switchboard.run",
      kind: "subagent_task",
      model: "builtin/echo",
      thinking: "medium",
    });
  });
});

describe("attachments reach a built-in model sub-agent", () => {
  const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
  const b64 = (u: Uint8Array) => {
    let bin = "";
    for (let i = 0; i < u.length; i += 0x8000) bin += String.fromCharCode(...u.subarray(i, i + 0x8000));
    return btoa(bin);
  };

  it("text files as text parts, images as image parts, other binaries named with their path", async () => {
    const fake = useFakeProvider({
      auto: (c) => c.reply("seen"),
      extraConfig: { tools: { sessions_spawn: { attachments: { enabled: true } } } },
    });
    const r = await invoke("sessions_spawn", {
      task: "read the files",
      attachments: [
        { name: "notes.md", content: "# Notes\nline two", mimeType: "text/markdown" },
        { name: "plot.png", content: b64(PNG), encoding: "base64" },
        {
          name: "blob.bin",
          content: b64(Uint8Array.from([0, 1, 2, 255])),
          encoding: "base64",
          mimeType: "application/octet-stream",
        },
      ],
    });
    expect(r.details.status).toBe("accepted");
    await waitRun(r.details.runId);
    const user = (fake.calls[0].body.messages as any[]).find((m) => m.role === "user");
    const key = encodeURIComponent(r.details.childSessionKey);
    expect(user.content).toEqual([
      { type: "text", text: expect.stringContaining("[Subagent Task]: read the files") },
      {
        type: "text",
        text:
          "[Attachment: blob.bin (application/octet-stream, 4 bytes)] binary content not included here; GET " +
          `/v1/sessions/${key}/attachments/blob.bin with this session's token.`,
      },
      { type: "text", text: "[Attachment: notes.md (text/markdown, 16 bytes)]\n# Notes\nline two" },
      { type: "text", text: "[Attachment: plot.png (no type, 12 bytes)]" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${b64(PNG)}` } },
    ]);
  });

  it("the configured maxTotalBytes can be sent through /tools/invoke (base64 included); beyond it the body is 413", async () => {
    const MiB = 1024 * 1024;
    useFakeProvider({
      auto: (c) => c.reply("ok"),
      extraConfig: { tools: { sessions_spawn: { attachments: { enabled: true, maxTotalBytes: 4 * MiB } } } },
    });
    const file = b64(new Uint8Array(MiB)); // 1 MiB of zero bytes: maxFileBytes, binary
    const attachments = [0, 1, 2, 3].map((i) => ({ name: `part${i}.bin`, content: file, encoding: "base64" }));
    const r = await invoke("sessions_spawn", { task: "big", attachments });
    expect(r.status).toBe(200);
    expect(r.details).toMatchObject({ status: "accepted", attachments: { count: 4, totalBytes: 4 * MiB } });
    const tooBig = await call("POST", "/tools/invoke", {
      tool: "sessions_spawn",
      args: { task: "x", attachments },
      pad: "x".repeat(2 * MiB),
    });
    expect(tooBig.status).toBe(413);
    // Without attachments enabled, tool calls keep the 2 MB limit.
    useFakeProvider({ auto: (c) => c.reply("ok") });
    expect(
      (await call("POST", "/tools/invoke", { tool: "sessions_spawn", args: { task: "x", attachments } })).status,
    ).toBe(413);
  });
});

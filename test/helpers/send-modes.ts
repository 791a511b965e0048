import { runInDurableObject } from "cloudflare:test";
import { expect, vi } from "vitest";
import { A2A_ANNOUNCE_STEP_HEADER } from "../../src/send/control-tokens";
import { type FakeCall, useFakeProvider } from "./fake-provider";
import { call, enc, invoke, sessionStub } from "./http";

// What the sessions_send mode tests share (test/tools/sessions-send-modes*.test.ts).

let n = 0;
export const uniq = (base: string) => `agent:main:${base}-${++n}-${crypto.randomUUID().slice(0, 8)}`;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const REQUESTER = "agent:main:main";
export const STEER_PREFIX = `[Inter-session message] sourceSession=${REQUESTER} sourceChannel=unknown sourceTool=sessions_send\n`;

/** The fake model holds each call for the test, except the agent-to-agent steps a followup's flow adds: skipped at once. */
export function provider() {
  return useFakeProvider({
    extraConfig: { tools: { sessions: { visibility: "all" } }, session: { agentToAgent: { maxPingPongTurns: 0 } } },
    auto: (c) => {
      if (systemOf(c).includes(A2A_ANNOUNCE_STEP_HEADER)) c.reply("ANNOUNCE_SKIP");
    },
  });
}

export async function post(key: string, message: string): Promise<string> {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message });
  expect(r.status).toBe(202);
  return r.json.runId as string;
}
export const wait = async (runId: string) => (await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json;
export const send = (args: Record<string, unknown>) => invoke("sessions_send", args, { sessionKey: REQUESTER });
export const systemOf = (c: FakeCall) => String(c.body.messages.find((m: any) => m.role === "system")?.content ?? "");

/** The session's runs in queue order: kind, status and the message that started each. */
export const runsOf = (key: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    s.storage.sql
      .exec<{ id: string; kind: string; status: string; input_json: string }>(
        "SELECT id, kind, status, input_json FROM runs ORDER BY qseq",
      )
      .toArray()
      .map((r) => ({ id: r.id, kind: r.kind, status: r.status, message: JSON.parse(r.input_json).message })),
  );
/** role:text of every transcript row, tool rows included. */
export const transcript = async (key: string) =>
  ((await call("GET", `/v1/sessions/${enc(key)}/history?includeTools=true&limit=100`)).json.messages as any[]).map(
    (m) => `${m.role}:${m.content?.find?.((b: any) => b.type === "text")?.text ?? m.content?.[0]?.name ?? ""}`,
  );

/** A target whose first run holds its first model call open. */
export async function runningTarget(fake: ReturnType<typeof provider>, base: string) {
  const key = uniq(base);
  const runId = await post(key, "work on it");
  await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
  return { key, runId };
}

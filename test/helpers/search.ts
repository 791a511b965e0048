import { runInDurableObject } from "cloudflare:test";
import { callExtension } from "../../src/session/extensions";
import type { TranscriptMessage } from "../../src/session/types";
import { invoke, sessionStub } from "./http";

/** Push a session's waiting messages to its search index now (the feed's alarm would, shortly). */
export async function indexNow(...keys: string[]): Promise<void> {
  for (const key of keys) await callExtension(sessionStub(key), "search-feed", "flush");
}

export const userMsg = (text: string, timestamp = Date.now()): TranscriptMessage => ({
  role: "user",
  content: [{ type: "text", text }],
  timestamp,
});

export const assistantMsg = (text: string, timestamp = Date.now()): TranscriptMessage => ({
  role: "assistant",
  content: [{ type: "text", text }],
  api: "test",
  provider: "test",
  model: "test",
  stopReason: "stop",
  timestamp,
});

/** Create a session (optionally as someone's child) and append messages to its transcript, each in its own transaction. */
export async function seedSession(
  key: string,
  messages: TranscriptMessage[],
  init?: { spawnedBy?: string; spawnDepth?: number },
): Promise<number[]> {
  await sessionStub(key).ensureSession(init);
  return runInDurableObject(sessionStub(key), (obj) =>
    messages.map((m) => obj.storage.transactionSync(() => obj.transcript.append(m, null))),
  );
}

/** sessions_search as `sessionKey`: the payload, or the error envelope's message for a 400. */
export async function search(args: Record<string, unknown>, sessionKey = "agent:main:main") {
  const r = await invoke("sessions_search", args, { sessionKey });
  return r.status === 200 ? r.details : { httpStatus: r.status, message: r.body?.error?.message };
}

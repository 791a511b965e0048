import { runInDurableObject } from "cloudflare:test";
import { MESSAGE_MAX_BYTES } from "../../src/session/byte-budget";
import type { TranscriptMessage } from "../../src/session/types";
import { sessionStub } from "./http";

/** Sessions of maximum-size messages, for the byte-budget and size-cap tests (docs/limits.md). */

export const MB = 1024 * 1024;
export const SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789";

/** 512 KiB of text exactly, starting with a secret that history and previews must mask. */
export const maxText = (i: number) => {
  const head = `#${i} ${SECRET} `;
  return head + "x".repeat(MESSAGE_MAX_BYTES - head.length);
};

/** Bytes of a value as it crosses the RPC boundary (serialised). */
export const rpcBytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).byteLength;

/** A maximum-size message: user for odd `i`, assistant for even. */
export function maxMessage(i: number): TranscriptMessage {
  const text = maxText(i);
  return i % 2 === 1
    ? { role: "user", content: [{ type: "text", text }], timestamp: 1_700_000_000_000 + i }
    : {
        role: "assistant",
        content: [{ type: "text", text }],
        api: "test",
        provider: "test",
        model: "m",
        stopReason: "stop",
        timestamp: 1_700_000_000_000 + i,
      };
}

/** Write `count` messages straight into a session's transcript (one transaction per message, like runs do). */
export async function seedTranscript(
  key: string,
  count: number,
  make: (i: number) => TranscriptMessage,
  init?: Record<string, unknown>,
): Promise<void> {
  await sessionStub(key).ensureSession(init);
  for (let i = 1; i <= count; i++) {
    await runInDurableObject(sessionStub(key), (obj) => {
      obj.transcript.append(make(i), null);
    });
  }
}

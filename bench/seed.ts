import type { TranscriptMessage } from "../src/session/types";

/** Filler that gives seeded messages the size of a typical chat turn (~200 bytes of text). */
const FILLER = "The quick brown fox jumps over the lazy dog while the session layer keeps every turn in order.";

/**
 * Message `n` of a synthetic transcript (benchmark seeding only): odd numbers are user turns, even
 * numbers the assistant's reply, in the same raw format real runs write (src/session/transcript.ts). ASCII only, so
 * `textBytes` characters are `textBytes` bytes.
 */
export function syntheticMessage(n: number, startText: string, textBytes?: number): TranscriptMessage {
  const base = `${startText} #${n}: ${FILLER} ${FILLER}`;
  // `textBytes`: a message of that size (the byte-budget benchmark seeds maximum-size messages).
  const text =
    textBytes && textBytes > base.length
      ? `${base} ${FILLER.repeat(Math.ceil(textBytes / FILLER.length)).slice(0, textBytes - base.length - 1)}`
      : base;
  const timestamp = Date.now();
  if (n % 2 === 1)
    return { role: "user", content: [{ type: "text", text }], timestamp, provenance: { kind: "external_user" } };
  return {
    role: "assistant",
    content: [{ type: "text", text }],
    api: "switchboard",
    provider: "builtin",
    model: "echo",
    usage: { input: 50, output: 50, cacheRead: 0, cacheWrite: 0, totalTokens: 100 },
    stopReason: "stop",
    timestamp,
  };
}

/**
 * How the SSE bridge schedules its `: ping` heartbeats (src/events/sse-bridge.ts): `every(ms, beat)` starts
 * repeating `beat` and returns the function that stops it. Production uses setInterval. A test swaps `every`
 * for one it drives (test/events/events-session.test.ts) because vitest's fake timers fire callbacks in the test's
 * own I/O context, where writing to the stream's response is refused by workerd.
 */
export const heartbeatTimer = {
  every(ms: number, beat: () => void): () => void {
    const handle = setInterval(beat, ms);
    return () => clearInterval(handle);
  },
};

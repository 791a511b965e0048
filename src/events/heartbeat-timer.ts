/**
 * How the SSE bridge schedules its `: ping` heartbeats and its end of life (src/events/sse-bridge.ts):
 * `every(ms, beat)` starts repeating `beat`, `after(ms, fire)` runs `fire` once; each returns the function
 * that stops it. Production uses setInterval and setTimeout. A test swaps them for ones it drives
 * (test/events/events-session.test.ts, test/events/events-authority.test.ts) because vitest's fake timers fire callbacks in
 * the test's own I/O context, where writing to the stream's response is refused by workerd.
 */
export const heartbeatTimer = {
  every(ms: number, beat: () => void): () => void {
    const handle = setInterval(beat, ms);
    return () => clearInterval(handle);
  },
  after(ms: number, fire: () => void): () => void {
    const handle = setTimeout(fire, ms);
    return () => clearTimeout(handle);
  },
};

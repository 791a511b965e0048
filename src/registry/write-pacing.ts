/**
 * Writes per second one index shard aims to stay under. Cloudflare documents about 1,000 requests/s
 * for one object, fewer when each writes (docs/scale.md); 200 leaves room for listings and the
 * writes that cannot wait (a new session, a session going idle).
 */
export const SHARD_WRITE_TARGET_PER_S = 200;
/** A session's routine index writes: at most one per this interval when its shard is quiet… */
export const INDEX_INTERVAL_MIN_MS = 1_000;
/** …and never sparser than this however busy (a listed row lags its session by at most this much). */
export const INDEX_INTERVAL_MAX_MS = 30_000;

/**
 * Back-pressure of one shard: it counts the writes it receives per second and tells each writer how
 * long to wait before its next routine write, so that the writers together stay near the target
 * whatever their number (N active sessions each writing every N/target seconds). Memory only on
 * purpose: after an eviction the shard starts from the minimum and converges within a second.
 */
export class WritePacer {
  private windowStart = 0;
  private inWindow = 0;
  private lastWindow = 0;

  /** Count one write at `now`; returns the interval the writer should keep before its next routine write. */
  record(now: number): number {
    if (now - this.windowStart >= 1_000) {
      this.lastWindow = now - this.windowStart < 2_000 ? this.inWindow : 0;
      this.windowStart = now;
      this.inWindow = 0;
    }
    this.inWindow++;
    const rate = Math.max(this.inWindow, this.lastWindow);
    return Math.min(
      INDEX_INTERVAL_MAX_MS,
      Math.max(INDEX_INTERVAL_MIN_MS, Math.ceil((1_000 * rate) / SHARD_WRITE_TARGET_PER_S)),
    );
  }

  /**
   * Writes per second now: the busier of the current and the last whole second, 0 after two quiet seconds.
   * The self-sizing index compares it with its split threshold (src/registry/registry-object.ts).
   */
  rate(now: number): number {
    if (now - this.windowStart >= 2_000) return 0;
    if (now - this.windowStart >= 1_000) return this.inWindow;
    return Math.max(this.inWindow, this.lastWindow);
  }
}

import type { Config } from "../config/schema";
import { parseCanonical } from "../keys";
import { log } from "../log";
import { indexEntryOf } from "../registry/row";
import { sessionIndex } from "../registry/session-index";
import { INDEX_INTERVAL_MIN_MS } from "../registry/write-pacing";
import { INDEX_TIMER } from "./core-timers";
import type { Timers } from "./timers";
import type { SessionMeta } from "./types";

/** What the index writer reads of its session object (src/session/session-object.ts). */
export interface IndexSyncHost {
  readonly key: string;
  readonly cfg: Config;
  readonly bindings: Env;
  readonly meta: SessionMeta | null;
  readonly timers: Timers;
  /** False once the session is deleted: nothing is scheduled for it any more. */
  readonly hasStorage: boolean;
}

/**
 * How soon a change must reach the index. `immediate`: at once (a new session, a PATCH — must be listed
 * when answered). `idle`: a session going idle — at once while its shard is quiet, else with its paced
 * writes: at one hot agent, idle transitions are most of a shard's writes (docs/scale.md), so under load
 * they follow the shard's back-pressure and the row's status lags by at most the interval.
 */
export interface IndexDirty {
  immediate?: boolean;
  idle?: boolean;
}

/** A session's row in its agent's index: written at once when it must be, else coalesced and paced by the shard. */
export class IndexSync {
  private lastSync = 0;
  /** Between routine writes: what the row's shard asked for last (src/registry/write-pacing.ts). */
  private intervalMs = INDEX_INTERVAL_MIN_MS;
  /** This instance wrote the sessionId locator (src/registry/session-index.ts): later writes skip it. */
  private locatorWritten = false;

  constructor(private readonly host: IndexSyncHost) {}

  /**
   * The row is stale: write it, coalesced to at most one write per interval. The timer row is written
   * first (durable: an eviction mid-write still leaves the write to do); the write happens now when the
   * last one is older than the interval (leading edge), when `immediate`, or when `idle` and the shard's
   * last answer asked for no more than the minimum interval (src/registry/write-pacing.ts); else when
   * the timer fires (trailing edge).
   */
  async markDirty(opts: IndexDirty = {}): Promise<void> {
    if (!this.host.meta) return;
    const now = Date.now();
    this.schedule(now);
    const shardQuiet = this.intervalMs <= INDEX_INTERVAL_MIN_MS;
    if (opts.immediate || (opts.idle && shardQuiet) || now - this.lastSync >= this.intervalMs) {
      try {
        await this.sync();
        return;
      } catch (err) {
        log.warn("registry_write_failed", {
          sessionKey: this.host.key,
          error: err,
          next: "the index timer retries it",
        });
      }
    }
    await this.host.timers.arm();
  }

  /** The coalesced index timer (inside the caller's transaction): due when the interval since the last write has passed, never later than a due one. */
  schedule(now: number): void {
    this.host.timers.set(INDEX_TIMER, "sync", Math.max(now, this.lastSync + this.intervalMs), undefined, {
      keepEarlier: true,
    });
  }

  /** Write the row; clears the pending index timer once written. */
  async sync(): Promise<void> {
    const meta = this.host.meta;
    if (!meta) return;
    this.lastSync = Date.now();
    const written = JSON.stringify(meta);
    const entry = indexEntryOf(meta, parseCanonical(meta.key, this.host.cfg));
    const paced = await sessionIndex(this.host.bindings, this.host.cfg, meta.agentId).upsert(entry, {
      locatorWritten: this.locatorWritten,
    });
    this.locatorWritten = true;
    this.intervalMs = paced.nextWriteInMs;
    // Only if nothing changed during the write: a change made meanwhile keeps its timer (and gets written).
    if (this.host.meta && this.host.hasStorage && JSON.stringify(this.host.meta) === written) {
      this.host.timers.clear(INDEX_TIMER, "sync");
      await this.host.timers.arm();
    }
  }
}

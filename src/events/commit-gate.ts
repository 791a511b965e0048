import { log } from "../log";

/**
 * Holds what a transaction wants published until that transaction has committed (docs/events.md).
 *
 * An event is written to SQLite inside the transaction of the change it reports. Sending it to watchers
 * before the transaction returns would leak a change that then rolls back (its seq is even handed out
 * again), and confirming each batch by reading it back costs a storage read per event. Instead the
 * object's `transactionSync` is wrapped once: every transaction, at any depth, gets a frame; items
 * offered while it runs go into the innermost frame; a nested transaction (a savepoint) that returns
 * merges its frame into its parent's, one that throws discards its frame, and when the outermost
 * transaction returns its items are handed to `publish` — after the commit, from memory.
 *
 * Wrapping the storage object itself (not a copy handed to some callers) means no writer can bypass it:
 * every module, and a test's `state.storage`, calls the same wrapped method (test/events/events-session.test.ts).
 */
export class CommitGate<T> {
  private readonly frames: T[][] = [];

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly publish: (items: T[]) => void,
  ) {
    const real = storage.transactionSync.bind(storage);
    const frames = this.frames;
    storage.transactionSync = <R>(body: () => R): R => {
      frames.push([]);
      let result: R;
      try {
        result = real(body);
      } catch (err) {
        frames.pop();
        throw err;
      }
      const done = frames.pop() as T[];
      const parent = frames.at(-1);
      if (parent) parent.push(...done);
      else if (done.length > 0) publishCommitted(publish, done);
      return result;
    };
  }

  /**
   * Offer an item written by `write` (a SQLite write): published once the write has committed. Outside
   * any transaction the write runs in one of its own, so every write and its item take the same path.
   */
  offer<R>(write: () => R, item: (written: R) => T): R {
    const frame = this.frames.at(-1);
    if (frame) {
      const written = write();
      frame.push(item(written));
      return written;
    }
    return this.storage.transactionSync(() => this.offer(write, item));
  }

  /** Something to do once the current transaction committed (now, outside any transaction). */
  afterCommit(item: T): void {
    const frame = this.frames.at(-1);
    if (frame) frame.push(item);
    else publishCommitted(this.publish, [item]);
  }
}

/** The transaction has committed: a failure to publish must not make its caller think it failed. */
function publishCommitted<T>(publish: (items: T[]) => void, items: T[]): void {
  try {
    publish(items);
  } catch (err) {
    log.error("events_publish_failed", { error: err instanceof Error ? err.message : String(err) });
  }
}

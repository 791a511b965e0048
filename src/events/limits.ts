/**
 * Bounds of the event streams (docs/events.md, docs/limits.md). One object so a test can shrink a bound
 * (test/events/events-session.test.ts) without a second code path; heartbeats are driven through heartbeat-timer.ts.
 */
export const EVENT_LIMITS = {
  /** Watchers of one session, both streams together; one more is a 429. */
  maxWatchersPerSession: 200,
  /** Bytes one watcher may have waiting for its reader; past it the reader is too slow and is dropped. */
  watcherBufferBytes: 1024 * 1024,
  /** Events per replay page, and its size budget in UTF-16 characters (at most 3 bytes each in UTF-8). */
  replayPageEvents: 100,
  replayPageBytes: 256 * 1024,
  /** Events kept per session; older rows are deleted as new ones are written. */
  retainedEvents: 10_000,
  /** What one running run's stream keeps in memory for a watcher that resumes (run-stream.ts). */
  runReplayEvents: 1000,
  runReplayChars: 256 * 1024,
  /** Runs whose stream records one object holds at once (one runs at a time; the cap is a backstop). */
  runRecords: 8,
  /** `: ping` comment interval, so proxies keep an idle stream open. */
  heartbeatMs: 15_000,
  /**
   * Longest life of one stream: it ends with `end {reason: "lifetime"}` and the client resumes with
   * `Last-Event-ID`, re-authorized — so a token revoked or rotated meanwhile stops being served within this.
   */
  streamLifetimeMs: 15 * 60_000,
};

/** Session-object → Worker control message: a replay page was sent and more pages remain. */
export const MORE = "\u0000more";
/** Worker → session object: the reader has room, send the next replay page. */
export const NEXT = "next";

import { type MigrationStep, runMigrations } from "../migrations";
import { jsonBytes } from "./byte-budget";
import { historyHeadOf } from "./history-head";
import type { TranscriptMessage } from "./types";

/**
 * SQLite schema of a session object. Versions live in a table because `PRAGMA user_version`
 * is not available in Durable Object SQLite; each migration runs once, in order.
 */
export const MIGRATIONS: MigrationStep[] = [
  `
  CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL);

  -- Transcript, seq-ordered. Reads are always "a page before seq N", served by the indexes below,
  -- so cost grows with the page, never with the transcript.
  CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    role TEXT NOT NULL,
    is_tool INTEGER NOT NULL,
    run_id TEXT,
    created_at INTEGER NOT NULL,
    json TEXT NOT NULL
  );
  CREATE INDEX messages_visible ON messages (is_tool, seq);

  -- Runs and the run queue: queued runs start in qseq (FIFO) order, one at a time.
  CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    qseq INTEGER NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    input_json TEXT NOT NULL,
    reply TEXT,
    error TEXT,
    usage_json TEXT,
    model TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- seq of the run's user message once written, so a retried run never writes it twice
    user_seq INTEGER,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    ended_at INTEGER,
    idempotency_key TEXT UNIQUE
  );
  CREATE INDEX runs_queue ON runs (status, qseq);

  -- One alarm multiplexed over this table: every "later" (run lease, run deadline, registry sync,
  -- flow steps, delivery retries, archival) is a row here, written with the state that causes it.
  CREATE TABLE timers (
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    payload TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, ref)
  );
  CREATE INDEX timers_due ON timers (due_at);

  -- Outbound deliveries (replies and announces), one chokepoint for send policy.
  CREATE TABLE outbox (
    id TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    channel TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    delivered_at INTEGER
  );
  CREATE INDEX outbox_status ON outbox (status, created_at);

  -- Persisted state machines (agent-to-agent flows, sub-agent announces): one row per flow.
  CREATE TABLE flows (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    json TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );

  -- Files attached to this session (sessions_spawn attachments), readable by its runs.
  CREATE TABLE attachments (
    name TEXT PRIMARY KEY,
    mime_type TEXT,
    bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
  );
  `,
  // sessions_spawn counts a requester's running children on every spawn: one index seek, not a scan.
  `CREATE INDEX flows_kind_state ON flows (kind, state);`,
  // Retention finds the oldest finished row of each kind/state by a seek (retention.ts); it covers the index above.
  `DROP INDEX flows_kind_state; CREATE INDEX flows_kind_state_updated ON flows (kind, state, updated_at);`,
  // Delivered rows are pruned a week after delivery (retention.ts).
  `CREATE INDEX outbox_delivered ON outbox (status, delivered_at);`,
  // Every timer gives up (timer-policy.ts): a failing timer carries its last error; after its last attempt
  // it moves to dead_timers (bounded per session), listed over GET /v1/sessions/{key}/timers/dead.
  `
  ALTER TABLE timers ADD COLUMN last_error TEXT;
  ALTER TABLE timers ADD COLUMN failing_since INTEGER;
  CREATE TABLE dead_timers (
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    payload TEXT,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    first_failed_at INTEGER NOT NULL,
    died_at INTEGER NOT NULL,
    PRIMARY KEY (kind, ref)
  );
  CREATE INDEX dead_timers_died ON dead_timers (died_at);
  `,
  // Byte budgets read inside the object (docs/limits.md): each message's stored size and its history
  // head's size sit in covering indexes, so a budgeted read picks its rows from the index alone and
  // loads only those; the added columns come after the json column in the row and are never read from it.
  // Heads live in their own table: small rows a history page reads without touching the full message.
  `
  ALTER TABLE messages ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE messages ADD COLUMN head_bytes INTEGER NOT NULL DEFAULT 0;
  DROP INDEX messages_visible;
  CREATE INDEX messages_visible ON messages (is_tool, seq, head_bytes);
  CREATE INDEX messages_sizes ON messages (seq, bytes, head_bytes);
  CREATE TABLE message_heads (seq INTEGER PRIMARY KEY, is_tool INTEGER NOT NULL, flags INTEGER NOT NULL, json TEXT NOT NULL);
  ALTER TABLE outbox ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX outbox_listing ON outbox (created_at, id, bytes);
  CREATE INDEX outbox_status_listing ON outbox (status, created_at, id, bytes);
  UPDATE outbox SET bytes = length(CAST(payload_json AS BLOB));
  `,
  // Messages written before the heads existed get theirs once (one pass; new messages get theirs on append).
  (sql) => backfillHistoryHeads(sql),
  // A run's own messages (its usage, latest tool result, partial progress) by a seek, not a scan of the transcript.
  `CREATE INDEX messages_run ON messages (run_id, role, seq);`,
  // Rows written before history hid control-token replies and announce-step prompts get their mark once
  // (conversation-rows.ts decides it for new rows as they are written).
  `
  UPDATE messages SET is_tool = 1 WHERE is_tool = 0 AND role = 'assistant'
    AND json_array_length(json, '$.content') = 1 AND json_extract(json, '$.content[0].type') = 'text'
    AND trim(json_extract(json, '$.content[0].text'), ' ' || char(9) || char(10) || char(13)) IN ('NO_REPLY', 'REPLY_SKIP', 'ANNOUNCE_SKIP');
  UPDATE messages SET is_tool = 1 WHERE is_tool = 0 AND role = 'user'
    AND run_id IN (SELECT id FROM runs WHERE kind IN ('subagent_announce', 'a2a_announce'));
  UPDATE message_heads SET is_tool = 1 WHERE is_tool = 0 AND seq IN (SELECT seq FROM messages WHERE is_tool = 1 AND role != 'toolResult');
  `,
  // The event log behind GET /v1/sessions/{key}/events (src/events/event-log.ts): AUTOINCREMENT so a pruned
  // seq is never handed out again and a resume point keeps its meaning.
  `CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, data TEXT NOT NULL);`,
  // Completion events stored before history hid them (conversation-rows.ts) get their mark once.
  `
  UPDATE messages SET is_tool = 1 WHERE is_tool = 0 AND role = 'user'
    AND run_id IN (SELECT id FROM runs WHERE kind = 'subagent_completion');
  UPDATE message_heads SET is_tool = 1 WHERE is_tool = 0 AND seq IN (SELECT seq FROM messages WHERE is_tool = 1 AND role != 'toolResult');
  `,
  // Compaction (src/compaction/): each summary of older turns, and where the context after it starts. The
  // planner reads turn boundaries and sizes from a covering index, never the messages themselves.
  `
  CREATE TABLE compactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    first_kept_seq INTEGER NOT NULL UNIQUE,
    summary TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    marker_seq INTEGER NOT NULL,
    run_id TEXT,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX messages_turns ON messages (seq, role, bytes);
  `,
  // sessions_send's steer and notify modes (src/send/send-inbox.ts): a steer waits here for its run's next
  // step, a notification for the session's next turn. Rows, not memory, so both survive an eviction.
  `
  CREATE TABLE send_inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    message_json TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    created_at INTEGER NOT NULL,
    consumed_at INTEGER
  );
  CREATE INDEX send_inbox_state ON send_inbox (kind, state, run_id, seq);
  `,
  // The state log behind session_status changesSince (src/events/state-log.ts): an event that is also a
  // material state change carries it in `state`; the partial index reads only those, and `event_marks`
  // keeps the state head and the exact pruned watermark across retention.
  `
  ALTER TABLE events ADD COLUMN state TEXT;
  CREATE INDEX events_state ON events (seq) WHERE state IS NOT NULL;
  CREATE TABLE event_marks (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    state_head INTEGER NOT NULL,
    pruned_state_through INTEGER NOT NULL
  );
  `,
  // The task ledger (src/tasks/task-store.ts, docs/tasks.md): the background tasks this session started. Listing
  // reads open tasks and recent updates by a seek on (status, updated_at); retention finds the next expiry by a
  // seek on cleanup_after; a child's report finds its row by its primary key. IF NOT EXISTS: tests that rewind
  // the schema version to re-run an earlier step run this one again too.
  `
  CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    runtime TEXT NOT NULL,
    status TEXT NOT NULL,
    child_key TEXT,
    run_id TEXT,
    agent_id TEXT,
    label TEXT,
    task TEXT NOT NULL,
    delivery_status TEXT NOT NULL,
    notify_policy TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    ended_at INTEGER,
    last_event_at INTEGER,
    updated_at INTEGER NOT NULL,
    cleanup_after INTEGER,
    error TEXT,
    terminal_summary TEXT,
    terminal_outcome TEXT,
    model TEXT,
    total_tokens INTEGER
  );
  CREATE INDEX IF NOT EXISTS tasks_status_updated ON tasks (status, updated_at);
  CREATE INDEX IF NOT EXISTS tasks_updated ON tasks (updated_at);
  CREATE INDEX IF NOT EXISTS tasks_cleanup ON tasks (cleanup_after) WHERE cleanup_after IS NOT NULL;
  `,
  // The search feed (src/search/feed.ts): the last transcript seq pushed to the agent's search index. A
  // session that already has messages gets its feed timer, so its transcript is indexed once the object
  // next arms its alarm (docs/search.md, "Sessions older than the index").
  `
  CREATE TABLE search_feed (id INTEGER PRIMARY KEY CHECK (id = 1), after_seq INTEGER NOT NULL);
  INSERT OR IGNORE INTO timers (kind, ref, due_at) SELECT 'search-feed', 'messages', 0 WHERE EXISTS (SELECT 1 FROM messages);
  `,
  // A2A push-notification configs (src/a2a/push-store.ts): a few per task (MAX_PUSH_CONFIGS_PER_TASK), found by the
  // task's run id when its state changes; kept with the run. IF NOT EXISTS: a schema rewind re-runs this step.
  `
  CREATE TABLE IF NOT EXISTS a2a_push_configs (
    run_id TEXT NOT NULL,
    id TEXT NOT NULL,
    url TEXT NOT NULL,
    token TEXT NOT NULL,
    auth_scheme TEXT,
    auth_credentials TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
  );
  `,
  // Watchers (src/events/watchers.ts, docs/events.md "Watchers and notices"): on a target, the sessions that
  // watch it with their cursors; on a watcher, the notices it holds for its targets until its turn read them.
  // IF NOT EXISTS: independent of any other step's place in this list.
  `
  CREATE TABLE IF NOT EXISTS watchers (
    watcher_key TEXT PRIMARY KEY,
    last_seen INTEGER NOT NULL,
    notified INTEGER NOT NULL,
    material INTEGER NOT NULL,
    pending INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'live',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS watching (
    target_key TEXT PRIMARY KEY,
    incarnation TEXT NOT NULL,
    notified INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    inbox_key TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS watching_state ON watching (state, updated_at);
  `,
];

/** Answers how many steps ran on an existing schema (src/migrations.ts). */
export function migrate(sql: SqlStorage): number {
  return runMigrations(sql, MIGRATIONS);
}

/** Sizes and history heads for messages that have none (written before the byte-budget migration). */
export function backfillHistoryHeads(sql: SqlStorage): void {
  for (let after = 0; ; ) {
    const rows = sql
      .exec<{ seq: number; is_tool: number; json: string }>(
        "SELECT seq, is_tool, json FROM messages WHERE seq > ? AND seq NOT IN (SELECT seq FROM message_heads) ORDER BY seq LIMIT 200",
        after,
      )
      .toArray();
    if (rows.length === 0) return;
    for (const r of rows) {
      const head = historyHeadOf(JSON.parse(r.json) as TranscriptMessage);
      sql.exec(
        "INSERT INTO message_heads (seq, is_tool, flags, json) VALUES (?, ?, ?, ?)",
        r.seq,
        r.is_tool,
        head.flags,
        head.json,
      );
      sql.exec("UPDATE messages SET bytes = ?, head_bytes = ? WHERE seq = ?", jsonBytes(r.json), head.bytes, r.seq);
    }
    after = rows[rows.length - 1].seq;
  }
}

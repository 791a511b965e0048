import { log } from "../log";
import { beginClosing } from "../session/closing";
import type { SessionHost } from "../session/host";
import type { TimerRow } from "../session/timers";
import { ANNOUNCE_FLOW } from "./announce-flow";
import { archivedEntryOf, exportToArchive } from "./archive";

/**
 * Removing a sub-agent child from its own alarm, so it survives restarts: archived N minutes after
 * its last run (cleanup "keep"), or deleted once its announce is with the requester (cleanup "delete";
 * test/spawn/subagent-archive.test.ts).
 */

export const ARCHIVE_TIMER = "subagent-archive";
export const DELETE_TIMER = "subagent-delete";
/** Archival waits this long again while an announce is still on its way or a run is active. */
const ARCHIVE_RETRY_MS = 60_000;

function busy(host: SessionHost): boolean {
  // A failed announce is not "on its way": it waits for an operator retry, which archival must not block.
  const pendingFlow =
    host.sql
      .exec("SELECT id FROM flows WHERE kind = ? AND state NOT IN ('done', 'failed') LIMIT 1", ANNOUNCE_FLOW)
      .toArray().length > 0;
  const activeRun =
    host.sql.exec("SELECT id FROM runs WHERE status IN ('queued', 'running') LIMIT 1").toArray().length > 0;
  return pendingFlow || activeRun;
}

/** Archive (keep) or delete (cleanup "delete") the child: from its own alarm, so it survives restarts. */
export async function removeChild(host: SessionHost, timer: TimerRow, archive: boolean): Promise<void> {
  // Already removed by a concurrent alarm pass: its storage (this timer included) is gone.
  if (!host.meta) return;
  const sub = host.meta.subagent;
  // A thread-bound child is never archived; an archive timer armed for one before that rule is dropped unrun.
  if (!sub || (archive && sub.mode === "session")) {
    host.timers.clear(timer.kind, timer.ref);
    return;
  }
  // Never drop an announce still on its way (or a run in progress): try again shortly.
  if (busy(host)) {
    host.timers.set(timer.kind, timer.ref, Date.now() + ARCHIVE_RETRY_MS);
    return;
  }
  // No archive bucket: the session's storage is its only copy, so it is kept (GET /healthz tells the operator).
  if (archive && !host.bindings.ARCHIVE) {
    host.timers.clear(timer.kind, timer.ref);
    log.warn("subagent_archive_skipped", {
      sessionKey: host.key,
      reason: "no ARCHIVE bucket is bound; the session is kept",
    });
    return;
  }
  // Closed synchronously after the checks above (no await since): a message arriving during the export is refused (409),
  // never accepted and then cleared with the storage (session/closing.ts). A failed export reopens it.
  const release = beginClosing(host, archive ? "archived" : "deleted");
  try {
    // Only kept children are archived (deleted ones take the DELETE_TIMER path); the index keeps an archived row.
    const archivedAs =
      archive &&
      (await exportToArchive(host, {
        retainAttachments: host.cfg.tools.sessions_spawn.attachments.retainOnSessionKeep,
      }))
        ? archivedEntryOf(host)
        : undefined;
    // deleteSession clears every table (attachments included), the alarm and the registry row (or marks it archived).
    await host.deleteSession(archivedAs ? { archivedAs } : {});
  } finally {
    release();
  }
}

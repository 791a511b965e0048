import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { vi } from "vitest";
import { deliveriesInFlight } from "../../src/channels/outbox-attempts";
import type { SessionObject } from "../../src/session/session-object";

/**
 * Wait until no session object has background work left: work started after a run ended (a sub-agent
 * lane slot release, an index write) keeps its timer row due until it is done, and the object's alarm
 * retries it; a channel delivery being POSTed pushes its timer ahead, so it is counted apart (src/channels/outbox.ts). A test that ends while such work is in flight lets it run into vitest's teardown, where its
 * RPCs and logs fail as "Closing rpc while … was pending" (test/spawn/subagent-requester-delivery.test.ts).
 */
export async function quiesce(timeoutMs = 10_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const busy: string[] = [];
      for (const id of await listDurableObjectIds(env.SESSIONS)) {
        const due = await runInDurableObject(env.SESSIONS.get(id), (obj: SessionObject, state) => {
          const sql = state.storage.sql;
          if (
            sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'timers'").toArray().length === 0
          )
            return [];
          const timers = sql
            .exec<{ kind: string; ref: string }>(
              "SELECT kind, ref FROM timers WHERE due_at <= ? AND kind != 'lease'",
              Date.now(),
            )
            .toArray()
            .map((t) => `${t.kind}:${t.ref}`);
          const posting = deliveriesInFlight(obj);
          return posting > 0 ? [...timers, `${posting} delivery POST(s) in flight`] : timers;
        });
        if (due.length > 0) busy.push(`${id.toString().slice(0, 8)} ${due.join(",")}`);
      }
      if (busy.length > 0) throw new Error(`background work still due: ${busy.join("; ")}`);
    },
    { timeout: timeoutMs, interval: 20 },
  );
}

/**
 * Answer whatever the fake model still holds (announce and completion turns) until no background work is
 * left: a turn answered can start another, so both are retried together.
 */
export async function answerAllAndQuiesce(fake: { pending(): { reply(text: string): void }[] }): Promise<void> {
  await vi.waitFor(
    async () => {
      for (const c of fake.pending()) c.reply("done");
      await quiesce(1_000);
    },
    { timeout: 15_000, interval: 50 },
  );
}

import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  inboxByKey,
  inboxMessage,
  insertNotification,
  insertSteer,
  KEEP_CONSUMED_ROWS,
  markConsumed,
} from "../../src/send/send-inbox";
import type { SessionObject } from "../../src/session/session-object";
import type { Provenance } from "../../src/session/types";
import { sessionStub } from "../helpers/http";

/**
 * The rows behind sessions_send's steer and notify modes (src/send/send-inbox.ts) stay bounded: used rows
 * are kept only for idempotent retries, the newest KEEP_CONSUMED_ROWS of them; rows still to be used are
 * never pruned. (The modes themselves: test/tools/sessions-send-modes.test.ts, sessions-send-followup-notify.test.ts.)
 */

const FROM: Provenance = { kind: "inter_session", sourceSessionKey: "agent:main:main", sourceTool: "sessions_send" };

const counts = (key: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    Object.fromEntries(
      s.storage.sql
        .exec<{ state: string; n: number }>("SELECT state, COUNT(*) AS n FROM send_inbox GROUP BY state")
        .toArray()
        .map((r) => [r.state, r.n]),
    ),
  );

describe("send inbox retention", () => {
  it(`keeps the newest ${KEEP_CONSUMED_ROWS} used steers and notifications; pending and follow-up rows are never pruned`, async () => {
    expect(KEEP_CONSUMED_ROWS).toBe(100);
    const key = "agent:main:inbox-prune";
    await sessionStub(key).ensureSession();
    const used = KEEP_CONSUMED_ROWS + 30;
    await runInDurableObject(sessionStub(key), (obj: SessionObject) =>
      obj.storage.transactionSync(() => {
        const now = Date.now();
        // Rows still to be used, written first (the oldest): a notification for the next turn, and a
        // steer whose run ended unread (state `followup`, src/send/send-modes.ts).
        insertNotification(obj, inboxMessage("still pending", FROM, now), "notify:pending");
        insertSteer(obj, "run-ended", inboxMessage("left over", FROM, now), "steer:left-over");
        obj.sql.exec("UPDATE send_inbox SET state = 'followup' WHERE idempotency_key = 'steer:left-over'");
        // Then many used ones, steers and notifications alternating, each used right after it was written.
        for (let i = 0; i < used; i++) {
          const idem = `${i % 2 ? "steer" : "notify"}:k${i}`;
          const id =
            i % 2
              ? insertSteer(obj, `run-${i}`, inboxMessage(`s${i}`, FROM, now), idem)
              : insertNotification(obj, inboxMessage(`n${i}`, FROM, now), idem).id;
          expect(id).not.toBe("full");
          markConsumed(obj, id as string);
        }
      }),
    );
    // Pruning runs on each insert: the last used row is the 101st until the next insert prunes it.
    expect(await counts(key)).toEqual({ pending: 1, followup: 1, consumed: KEEP_CONSUMED_ROWS + 1 });
    await runInDurableObject(sessionStub(key), (obj: SessionObject) =>
      obj.storage.transactionSync(() => insertNotification(obj, inboxMessage("next", FROM, Date.now()), undefined)),
    );
    expect(await counts(key)).toEqual({ pending: 2, followup: 1, consumed: KEEP_CONSUMED_ROWS });
    await runInDurableObject(sessionStub(key), (obj: SessionObject) => {
      // The newest used rows keep their receipts (a retry still finds them); the oldest are gone.
      const first = used - KEEP_CONSUMED_ROWS;
      expect(inboxByKey(obj, `notify:k${first}`)?.state).toBe("consumed");
      expect(inboxByKey(obj, `steer:k${used - 1}`)?.state).toBe("consumed");
      expect(inboxByKey(obj, `steer:k${first - 1}`)).toBeUndefined();
      expect(inboxByKey(obj, "notify:k0")).toBeUndefined();
      // The oldest rows of all, not yet used, are still there.
      expect(inboxByKey(obj, "notify:pending")?.state).toBe("pending");
      expect(inboxByKey(obj, "steer:left-over")?.state).toBe("followup");
    });
  });
});
